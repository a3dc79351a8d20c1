// Malformed input: every truncation of every valid message type, flipped markers,
// overflowing K and S, wrong lengths, non-finite values and bad i8 blocks each give the
// right PROTOCOL §7 code, with a message that names the problem.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "base/byte_io.h"
#include "support/hex.h"
#include "support/random_values.h"
#include "wire/codec.h"

namespace larql::wire {
namespace {

constexpr Encoding kEncodings[] = {Encoding::f32, Encoding::f16, Encoding::i8};

struct Message {
  std::string name;
  bool request;
  Encoding encoding;
  size_t hidden;
  std::string bytes;
};

std::vector<Message> valid_messages() {
  std::vector<Message> out;
  const size_t seq_len = 2;
  for (Encoding e : {Encoding::f32, Encoding::f16, Encoding::q8, Encoding::i8}) {
    const size_t hidden = e == Encoding::q8 ? 32 : 3;  // q8 needs whole blocks of 32
    const auto values = test::random_rows(seq_len, hidden, 5, 10.0f);
    const std::string en(encoding_name(e));
    for (auto layers : {std::vector<uint32_t>{4}, std::vector<uint32_t>{1, 6, 2}}) {
      std::string msg;
      EXPECT_TRUE(encode_request(e, {.layers = layers, .seq_len = seq_len}, hidden, values, msg).ok());
      out.push_back({"request/" + en + "/" + std::to_string(layers.size()), true, e, hidden, msg});
    }
    for (size_t records : {1, 2}) {
      std::vector<ResponseRecord> recs(records, ResponseRecord{3, values});
      std::string msg;
      EXPECT_TRUE(encode_response(e, recs, seq_len, hidden, 0.5f, msg).ok());
      out.push_back({"response/" + en + "/" + std::to_string(records), false, e, hidden, msg});
    }
  }
  return out;
}

ErrorCode parse_error(const Message& m, const std::string& body) {
  if (m.request) {
    auto r = parse_request(as_bytes(body), m.encoding, m.hidden);
    EXPECT_FALSE(r.ok()) << m.name << " with " << body.size() << " bytes parsed";
    return r.ok() ? ErrorCode::internal : r.error().code;
  }
  auto r = parse_response(as_bytes(body), m.encoding, m.hidden);
  EXPECT_FALSE(r.ok()) << m.name << " with " << body.size() << " bytes parsed";
  return r.ok() ? ErrorCode::internal : r.error().code;
}

ErrorCode request_error(const std::string& body, Encoding e, size_t hidden) {
  auto r = parse_request(as_bytes(body), e, hidden);
  return r.ok() ? ErrorCode::internal : r.error().code;
}

TEST(CodecMalformed, ValidMessagesParse) {
  for (const auto& m : valid_messages()) {
    if (m.request)
      EXPECT_TRUE(parse_request(as_bytes(m.bytes), m.encoding, m.hidden).ok()) << m.name;
    else
      EXPECT_TRUE(parse_response(as_bytes(m.bytes), m.encoding, m.hidden).ok()) << m.name;
  }
}

TEST(CodecMalformed, EveryTruncationIsTruncated) {
  for (const auto& m : valid_messages()) {
    for (size_t len = 0; len < m.bytes.size(); ++len)
      EXPECT_EQ(parse_error(m, m.bytes.substr(0, len)), ErrorCode::truncated) << m.name << " cut to " << len;
  }
}

TEST(CodecMalformed, TrailingBytesAreBadLength) {
  for (const auto& m : valid_messages()) EXPECT_EQ(parse_error(m, m.bytes + '\0'), ErrorCode::bad_length) << m.name;
}

TEST(CodecMalformed, FlippedBatchMarker) {
  // §10 batch request with its marker flipped reads as a single request for layer
  // 0xfffffffe, seq_len 2 (the K field): 28 value bytes where 16 are expected.
  std::string msg = test::from_hex(
      "feffffff 02000000 03000000 07000000 02000000 01000000 9c1f0000 0000803f 00000040 00004040 00008040");
  EXPECT_EQ(request_error(msg, Encoding::f32, 2), ErrorCode::bad_length);
  // A single request whose layer is the marker reads as a batch of K = 1 layer (the
  // seq_len field) with seq_len = 8092 (the top_k field): its values are missing.
  std::string single = test::from_hex("ffffffff 01000000 01000000 9c1f0000 0000803f 000000c0 0000003f 00000000");
  EXPECT_EQ(request_error(single, Encoding::f32, 4), ErrorCode::truncated);
}

TEST(CodecMalformed, LayerCountsOutOfRange) {
  for (uint32_t k : {0u, kMaxBatchLayers + 1, 0x40000000u, 0xffffffffu}) {
    std::string msg(64, '\0');
    auto* p = reinterpret_cast<uint8_t*>(msg.data());
    store_u32(p, kBatchMarker);
    store_u32(p + 4, k);
    auto r = parse_request(as_bytes(msg), Encoding::f32, 2);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::bad_layer_count) << k;
    EXPECT_NE(r.error().message.find(std::to_string(k)), std::string::npos) << r.error().message;
  }
  std::string response(64, '\0');
  store_u32(reinterpret_cast<uint8_t*>(response.data()), kBatchMarker);
  store_u32(reinterpret_cast<uint8_t*>(response.data()) + 4, 0x7fffffffu);
  auto r = parse_response(as_bytes(response), Encoding::f32, 2);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::bad_layer_count);
}

TEST(CodecMalformed, SeqLenZeroAndOverflow) {
  std::string msg = test::from_hex("05000000 00000000 01000000 9c1f0000");
  EXPECT_EQ(request_error(msg, Encoding::f32, 4), ErrorCode::bad_seq_len);
  std::string big = test::from_hex("05000000 ffffffff 01000000 9c1f0000 00000000");
  const size_t huge_hidden = std::numeric_limits<size_t>::max() / 2;
  for (Encoding e : kEncodings) EXPECT_EQ(request_error(big, e, huge_hidden), ErrorCode::bad_seq_len);
  EXPECT_EQ(request_error(big, Encoding::q8, huge_hidden & ~size_t{31}), ErrorCode::bad_seq_len);
  // A large seq_len that does not overflow simply lacks its values.
  EXPECT_EQ(request_error(big, Encoding::f32, 5120), ErrorCode::truncated);

  std::string response = test::from_hex("ffffffff 01000000 00000000 03000000 ffffffff ffffffff");
  auto r = parse_response(as_bytes(response), Encoding::f32, huge_hidden);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::bad_seq_len);
}

TEST(CodecMalformed, WrongHiddenSizeNamesBothShapes) {
  // Three values where the model wants four.
  std::string msg = test::from_hex("05000000 01000000 01000000 9c1f0000 0000803f 000000c0 0000003f");
  auto r = parse_request(as_bytes(msg), Encoding::f32, 4);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::truncated);
  EXPECT_NE(r.error().message.find("seq_len=1 × hidden=4"), std::string::npos) << r.error().message;
  // Five values where the model wants four.
  auto longer = parse_request(as_bytes(msg + test::from_hex("00000000 00000000")), Encoding::f32, 4);
  ASSERT_FALSE(longer.ok());
  EXPECT_EQ(longer.error().code, ErrorCode::bad_length);
}

TEST(CodecMalformed, BatchRecordCountMismatch) {
  std::string msg = test::from_hex("ffffffff 02000000 00000040 03000000 01000000 05000000 0000803f 00000040"
                                   "07000000 01000000 02000000 0000803f 00000040");
  auto r = parse_response(as_bytes(msg), Encoding::f32, 2);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::bad_length);
  EXPECT_NE(r.error().message.find("count=5"), std::string::npos) << r.error().message;
}

TEST(CodecMalformed, FullOutputFlagRequired) {
  std::string msg = test::from_hex("05000000 01000000 00000000 9c1f0000 0000803f 000000c0 0000003f 00000000");
  EXPECT_EQ(request_error(msg, Encoding::f32, 4), ErrorCode::full_output_required);
  // Reserved bits are ignored as long as bit 0 is set.
  msg[8] = 0x03;
  EXPECT_TRUE(parse_request(as_bytes(msg), Encoding::f32, 4).ok());
}

Status decode(Encoding e, const std::string& values, size_t rows, size_t hidden) {
  std::vector<float> out(rows * hidden);
  return decode_values(e, as_bytes(values), rows, hidden, out);
}

TEST(CodecMalformed, NonFiniteValuesRejected) {
  // Put the bad value at every position of a vector-sized array, so both SIMD body and tail see it.
  for (size_t at = 0; at < 19; ++at) {
    for (float bad : {NAN, INFINITY, -INFINITY}) {
      std::vector<float> v(19, 1.0f);
      v[at] = bad;
      std::string f32(reinterpret_cast<const char*>(v.data()), v.size() * 4);
      auto s = decode(Encoding::f32, f32, 1, 19);
      ASSERT_FALSE(s.ok());
      EXPECT_EQ(s.error().code, ErrorCode::non_finite_input);
      EXPECT_NE(s.error().message.find("index " + std::to_string(at)), std::string::npos) << s.error().message;
    }
    for (uint16_t bad : {uint16_t{0x7c00}, uint16_t{0xfc00}, uint16_t{0x7e00}, uint16_t{0x7c01}}) {
      std::vector<uint16_t> h(19, 0x3c00);
      h[at] = bad;
      std::string f16(reinterpret_cast<const char*>(h.data()), h.size() * 2);
      auto s = decode(Encoding::f16, f16, 1, 19);
      ASSERT_FALSE(s.ok());
      EXPECT_EQ(s.error().code, ErrorCode::non_finite_input);
    }
  }
}

TEST(CodecMalformed, BadI8Blocks) {
  auto block = [](float scale, float zero_point) {
    std::string b(8 + 4, '\x01');
    store_f32(reinterpret_cast<uint8_t*>(b.data()), scale);
    store_f32(reinterpret_cast<uint8_t*>(b.data()) + 4, zero_point);
    return b;
  };
  const std::string good = block(0.5f, 0.0f);
  EXPECT_TRUE(decode(Encoding::i8, good + good, 2, 4).ok());
  EXPECT_TRUE(decode(Encoding::i8, block(0.0f, 0.0f), 1, 4).ok());  // a zero scale decodes to zeros
  for (const auto& bad : {block(-1.0f, 0.0f), block(NAN, 0.0f), block(INFINITY, 0.0f), block(3e38f, 0.0f),
                          block(0.5f, 1.0f), block(0.5f, NAN), block(0.5f, -2.0f)}) {
    auto s = decode(Encoding::i8, good + bad, 2, 4);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.error().code, ErrorCode::bad_i8_block);
    EXPECT_NE(s.error().message.find("position 1"), std::string::npos) << s.error().message;
  }
}

TEST(CodecMalformed, NonFiniteLatencyRejected) {
  std::string msg = test::from_hex("05000000 01000000 0000c07f 0000803f");
  auto r = parse_response(as_bytes(msg), Encoding::f32, 1);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::non_finite_input);
}

TEST(CodecMalformed, EncoderRejectsBadShapes) {
  std::string out;
  std::vector<float> v(8, 1.0f);
  EXPECT_EQ(encode_request(Encoding::f32, {.layers = {}, .seq_len = 1}, 8, v, out).error().code,
            ErrorCode::bad_layer_count);
  EXPECT_EQ(encode_request(Encoding::f32, {.layers = {1}, .seq_len = 0}, 8, v, out).error().code,
            ErrorCode::bad_seq_len);
  EXPECT_EQ(encode_request(Encoding::f32, {.layers = {1}, .seq_len = 2}, 8, v, out).error().code,
            ErrorCode::bad_length);
}

}  // namespace
}  // namespace larql::wire
