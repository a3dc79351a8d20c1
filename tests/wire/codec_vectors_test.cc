// PROTOCOL.md §10: the reference implementation's byte vectors, reproduced exactly by our
// encoders and decoded back to exactly the listed values; the f16 and i8 edge cases.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "base/f16.h"
#include "support/hex.h"
#include "wire/codec.h"
#include "wire/kernels.h"

namespace larql::wire {
namespace {

using test::from_hex;
using test::to_hex;

std::vector<float> decode_all(Encoding e, Bytes values, size_t rows, size_t hidden) {
  std::vector<float> out(rows * hidden);
  auto s = decode_values(e, values, rows, hidden, out);
  EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().message);
  return out;
}

TEST(CodecVectors, SingleRequestF32) {
  const std::string expected = from_hex("05000000 01000000 01000000 9c1f0000 0000803f 000000c0 0000003f 00000000");
  const std::vector<float> residual{1, -2, 0.5, 0};
  std::string out;
  auto r = encode_request(Encoding::f32, {.layers = {5}, .seq_len = 1}, 4, residual, out);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->fell_back);
  EXPECT_EQ(to_hex(out), to_hex(expected));

  auto view = parse_request(as_bytes(expected), Encoding::f32, 4);
  ASSERT_TRUE(view.ok()) << view.error().message;
  EXPECT_FALSE(view->header.batch);
  EXPECT_EQ(view->header.layers, std::vector<uint32_t>{5});
  EXPECT_EQ(view->header.seq_len, 1u);
  EXPECT_EQ(view->header.flags, 1u);
  EXPECT_EQ(view->header.top_k, 8092u);
  EXPECT_EQ(decode_all(Encoding::f32, view->values, 1, 4), residual);
}

TEST(CodecVectors, BatchRequestF32) {
  const std::string expected = from_hex(
      "ffffffff 02000000 03000000 07000000 02000000 01000000 9c1f0000"
      "0000803f 00000040 00004040 00008040");
  const std::vector<float> residual{1, 2, 3, 4};
  std::string out;
  auto r = encode_request(Encoding::f32, {.layers = {3, 7}, .seq_len = 2}, 2, residual, out);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(to_hex(out), to_hex(expected));

  auto view = parse_request(as_bytes(expected), Encoding::f32, 2);
  ASSERT_TRUE(view.ok()) << view.error().message;
  EXPECT_TRUE(view->header.batch);
  EXPECT_EQ(view->header.layers, (std::vector<uint32_t>{3, 7}));
  EXPECT_EQ(view->header.seq_len, 2u);
  EXPECT_EQ(decode_all(Encoding::f32, view->values, 2, 2), residual);
}

struct ResponseVector {
  Encoding encoding;
  const char* hex;
};

TEST(CodecVectors, SingleResponseAllEncodings) {
  const std::vector<float> output{1, -2, 0.5, 0};
  for (auto [e, hex] : {ResponseVector{Encoding::f32, "05000000 01000000 0000c03f 0000803f 000000c0 0000003f 00000000"},
                        ResponseVector{Encoding::f16, "05000000 01000000 0000c03f 003c 00c0 0038 0000"},
                        ResponseVector{Encoding::i8, "05000000 01000000 0000c03f 0402813c 00000000 40 81 20 00"}}) {
    SCOPED_TRACE(encoding_name(e));
    const std::string expected = from_hex(hex);
    ResponseRecord rec{5, output};
    std::string out;
    auto r = encode_response(e, {&rec, 1}, 1, 4, 1.5f, out);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->encoding, e);
    EXPECT_EQ(to_hex(out), to_hex(expected));

    auto view = parse_response(as_bytes(expected), e, 4);
    ASSERT_TRUE(view.ok()) << view.error().message;
    EXPECT_FALSE(view->batch);
    EXPECT_EQ(view->latency_ms, 1.5f);
    ASSERT_EQ(view->records.size(), 1u);
    EXPECT_EQ(view->records[0].layer, 5u);
    EXPECT_EQ(view->records[0].seq_len, 1u);
    auto decoded = decode_all(e, view->records[0].values, 1, 4);
    if (e == Encoding::i8) {
      // q × scale: 64·(2/127), -127·(2/127), 32·(2/127), 0
      const float scale = 2.0f / 127.0f;
      EXPECT_EQ(decoded, (std::vector<float>{64 * scale, -127 * scale, 32 * scale, 0}));
    } else {
      EXPECT_EQ(decoded, output);
    }
  }
}

TEST(CodecVectors, BatchResponseAllEncodings) {
  const std::vector<float> layer3{1, 2, 3, -4};
  const std::vector<float> layer7{0.25, 0, 0, 0};
  const std::string head = "ffffffff 02000000 00000040";
  for (auto [e, hex] : {
           ResponseVector{Encoding::f32,
                          "03000000 02000000 04000000 0000803f 00000040 00004040 000080c0"
                          "07000000 02000000 04000000 0000803e 00000000 00000000 00000000"},
           ResponseVector{Encoding::f16,
                          "03000000 02000000 04000000 003c 0040 0042 00c4"
                          "07000000 02000000 04000000 0034 0000 0000 0000"},
           ResponseVector{Encoding::i8,
                          "03000000 02000000 04000000 [0402813c 00000000 40 7f] [0402013d 00000000 5f 81]"
                          "07000000 02000000 04000000 [0402013b 00000000 7f 00] [0000803f 00000000 00 00]"}}) {
    SCOPED_TRACE(encoding_name(e));
    const std::string expected = from_hex(head + hex);
    const ResponseRecord recs[] = {{3, layer3}, {7, layer7}};
    std::string out;
    auto r = encode_response(e, recs, 2, 2, 2.0f, out);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(to_hex(out), to_hex(expected));

    auto view = parse_response(as_bytes(expected), e, 2);
    ASSERT_TRUE(view.ok()) << view.error().message;
    EXPECT_TRUE(view->batch);
    EXPECT_EQ(view->latency_ms, 2.0f);
    ASSERT_EQ(view->records.size(), 2u);
    EXPECT_EQ(view->records[0].layer, 3u);
    EXPECT_EQ(view->records[1].layer, 7u);
    auto d3 = decode_all(e, view->records[0].values, 2, 2);
    auto d7 = decode_all(e, view->records[1].values, 2, 2);
    if (e == Encoding::i8) {
      const float s1 = 2.0f / 127, s2 = 4.0f / 127, s3 = 0.25f / 127;
      EXPECT_EQ(d3, (std::vector<float>{64 * s1, 127 * s1, 95 * s2, -127 * s2}));
      EXPECT_EQ(d7, (std::vector<float>{127 * s3, 0, 0, 0}));
    } else {
      EXPECT_EQ(d3, layer3);
      EXPECT_EQ(d7, layer7);
    }
  }
}

TEST(CodecVectors, F16EdgeCasesBothKernels) {
  struct Case {
    float in;
    uint16_t out;
  };
  const Case cases[] = {{65504.0f, 0x7bff}, {65519.0f, 0x7bff}, {65520.0f, 0x7c00}, {6e-8f, 0x0001},
                        {2.9e-8f, 0x0000},  {-0.0f, 0x8000},    {1.0f + 0x1p-11f, 0x3c00}, {0.1f, 0x2e66}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.in);
    EXPECT_EQ(f32_to_f16(c.in), c.out);
    for (const WireKernels* k : {&scalar_kernels(), &best_kernels()}) {
      // Pad to a full vector so the SIMD body, not only the scalar tail, sees the value.
      std::vector<float> in(16, c.in);
      std::vector<uint8_t> out(32);
      bool fits = k->encode_f16(in.data(), in.size(), out.data());
      EXPECT_EQ(fits, c.out != 0x7c00) << k->name;
      for (size_t i = 0; i < 16; ++i) EXPECT_EQ(out[2 * i] | (out[2 * i + 1] << 8), c.out) << k->name;
    }
  }
  EXPECT_EQ(f16_to_f32(0x2e66), 0.0999755859375f);
}

TEST(CodecVectors, I8EdgeCasesBothKernels) {
  for (const WireKernels* k : {&scalar_kernels(), &best_kernels()}) {
    SCOPED_TRACE(k->name);
    const float row[] = {127, 0.5, -0.5, 1.5, -1.5, 2.5};
    uint8_t block[8 + 6];
    ASSERT_TRUE(k->encode_i8_row(row, 6, block));
    EXPECT_EQ(to_hex({reinterpret_cast<char*>(block), sizeof block}), "0000803f00000000" "7f01ff02fe03");

    const float zeros[] = {0, 0, 0};
    uint8_t zblock[8 + 3];
    ASSERT_TRUE(k->encode_i8_row(zeros, 3, zblock));
    EXPECT_EQ(to_hex({reinterpret_cast<char*>(zblock), sizeof zblock}), "0000803f00000000" "000000");
  }
}

}  // namespace
}  // namespace larql::wire
