// PROTOCOL §11 kernels: every SIMD q8 encoder and decoder bit-identical to the scalar
// oracle (q8's arithmetic is one exact division and one product, so there are no
// near-tie exceptions as in i8), and the oracle itself checked against the §11 rules.
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "base/f16.h"
#include "support/random_values.h"
#include "wire/kernels.h"
#include "wire/q8_block.h"

namespace larql::wire {
namespace {

std::vector<const WireKernels*> simd_tables() {
  auto tables = supported_kernels();
  tables.erase(tables.begin());
  return tables;
}

class Q8Kernels : public ::testing::TestWithParam<const WireKernels*> {
 protected:
  const WireKernels& simd() const { return *GetParam(); }
  const WireKernels& scalar() const { return scalar_kernels(); }

  // Encodes with both tables and requires the same bytes.
  std::vector<uint8_t> encode_both(const std::vector<float>& in) const {
    std::vector<uint8_t> a(in.size() / 32 * kQ8BlockBytes, 0xaa), b(a.size(), 0x55);
    EXPECT_TRUE(scalar().encode_q8(in.data(), in.size(), a.data()));
    EXPECT_TRUE(simd().encode_q8(in.data(), in.size(), b.data()));
    EXPECT_EQ(a, b) << simd().name;
    return a;
  }
};
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(Q8Kernels);
INSTANTIATE_TEST_SUITE_P(Supported, Q8Kernels, ::testing::ValuesIn(simd_tables()), [](const auto& info) {
  std::string name;
  for (char c : std::string(info.param->name)) name += std::isalnum(c) ? c : '_';
  return name;
});

TEST_P(Q8Kernels, EncodeMatchesScalarOnRandomRows) {
  for (size_t n : {32u, 64u, 96u, 384u, 4096u, 5120u}) {
    SCOPED_TRACE(n);
    encode_both(test::random_rows(3, n, static_cast<uint32_t>(n)));
  }
}

TEST_P(Q8Kernels, EncodeMatchesScalarOnTiesTinyAndSubnormalBlocks) {
  std::vector<float> in;
  // Exact ties x/d = k + 0.5: with m = 127 × d exactly representable, d = 1 (f16 exact).
  for (int i = 0; i < 32; ++i) in.push_back(i == 0 ? 127.0f : (i % 2 ? 1 : -1) * (float(i % 20) + 0.5f));
  // A block below every f16 scale: d rounds to 0, all q are 0.
  for (int i = 0; i < 32; ++i) in.push_back(1e-9f * float(i - 16));
  // Subnormal f16 scales (m/127 between 2^-25 and 2^-14), and f32 subnormal values.
  for (float m : {1e-6f, 5e-6f, 3e-5f, 1e-3f}) {
    for (int i = 0; i < 32; ++i) in.push_back(m * std::sin(float(i) * 1.3f) * (i == 7 ? 1.0f / std::fabs(std::sin(9.1f)) : 1.0f));
  }
  for (int i = 0; i < 32; ++i) in.push_back(i == 3 ? 1e-40f : -2e-42f * float(i));
  // All zeros, and signed zeros.
  for (int i = 0; i < 32; ++i) in.push_back(i % 2 ? -0.0f : 0.0f);
  // Large values just inside f16's scale range (m/127 < 65520).
  for (int i = 0; i < 32; ++i) in.push_back(8.3e6f * float(i - 16) / 16.0f);
  const auto blocks = encode_both(in);
  encode_both(std::vector<float>(in.begin(), in.begin() + 8 * 32));  // one whole group of eight, ties in it
  encode_both(std::vector<float>(in.begin() + 32, in.begin() + 9 * 32));  // a group without ties
  // The tie block: away from zero.
  for (int i = 1; i < 32; ++i) {
    const float x = in[size_t(i)];
    const int expected = int(std::copysign(std::floor(std::fabs(x) + 0.5f), x));
    EXPECT_EQ(int(int8_t(blocks[2 + size_t(i)])), expected) << x;
  }
  uint16_t d;
  std::memcpy(&d, blocks.data() + kQ8BlockBytes, 2);
  EXPECT_EQ(d, 0u);  // the 1e-9 block
  for (size_t i = 0; i < 32; ++i) EXPECT_EQ(blocks[kQ8BlockBytes + 2 + i], 0u);
}

TEST_P(Q8Kernels, EncodeRefusesNonFiniteValuesAndScalesBeyondF16) {
  for (const WireKernels* k : {&scalar(), &simd()}) {
    std::vector<float> in(96, 1.0f);
    std::vector<uint8_t> out(3 * kQ8BlockBytes);
    for (float bad : {NAN, INFINITY, -INFINITY}) {
      for (size_t at : {0u, 31u, 40u, 95u}) {
        in[at] = bad;
        EXPECT_FALSE(k->encode_q8(in.data(), in.size(), out.data())) << k->name << " at " << at;
        in[at] = 1.0f;
      }
    }
    // 65520 × 127 rounds to f16 infinity; a hair below it does not.
    in[50] = 65520.0f * 127.0f;
    EXPECT_FALSE(k->encode_q8(in.data(), in.size(), out.data())) << k->name;
    in[50] = 65504.0f * 127.0f;
    EXPECT_TRUE(k->encode_q8(in.data(), in.size(), out.data())) << k->name;
  }
}

TEST_P(Q8Kernels, DecodeMatchesScalarAndRejectsTheSameScales) {
  std::mt19937 rng(7);
  std::vector<uint8_t> blocks(40 * kQ8BlockBytes);
  for (auto& b : blocks) b = uint8_t(rng());
  // Valid scales everywhere (random f16 bits with the sign and the top exponent bit cleared),
  // then the edge cases a decoder accepts: +0, -0 and q = -128.
  for (size_t b = 0; b < 40; ++b) {
    uint16_t d = uint16_t(rng()) & 0x3fffu;
    if (b == 3) d = 0x0000;
    if (b == 4) d = 0x8000;
    if (b == 5) d = 0x0001;  // the smallest subnormal
    if (b == 6) d = 0x7bff;  // f16's largest finite value
    std::memcpy(blocks.data() + b * kQ8BlockBytes, &d, 2);
  }
  blocks[7 * kQ8BlockBytes + 2] = 0x80;  // q = -128
  std::vector<float> a(40 * 32), b(a.size());
  ASSERT_TRUE(scalar().decode_q8(blocks.data(), a.size(), a.data()));
  ASSERT_TRUE(simd().decode_q8(blocks.data(), b.size(), b.data()));
  ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0);
  for (size_t i = 0; i < 32; ++i) EXPECT_EQ(a[4 * 32 + i], 0.0f);  // d = -0 decodes to zeros
  uint16_t d7;
  std::memcpy(&d7, blocks.data() + 7 * kQ8BlockBytes, 2);
  EXPECT_EQ(a[7 * 32], -128.0f * f16_to_f32(d7));

  for (uint16_t bad : {uint16_t(0x7c00), uint16_t(0xfc00), uint16_t(0x7e00), uint16_t(0xbc00), uint16_t(0x8001)}) {
    auto copy = blocks;
    std::memcpy(copy.data() + 39 * kQ8BlockBytes, &bad, 2);
    EXPECT_FALSE(scalar().decode_q8(copy.data(), a.size(), a.data())) << std::hex << bad;
    EXPECT_FALSE(simd().decode_q8(copy.data(), b.size(), b.data())) << std::hex << bad;
  }
}

TEST(Q8Rules, ScalarOracleFollowsSection11) {
  // m = 4 → d = f16(4/127) = 0x2808; q = round_half_away(x / float(d)).
  EXPECT_EQ(q8_scale_for_max(4.0f), 0x2808u);
  EXPECT_EQ(q8_scale_for_max(1.0f), 0x2008u);
  EXPECT_EQ(q8_quantize(0.374f, f16_to_f32(0x2008)), 48);  // GGML's unrounded scale gives 47
  EXPECT_EQ(q8_quantize(-1e9f, 1.0f), -127);
  EXPECT_EQ(q8_quantize(1e9f, 1.0f), 127);
  EXPECT_TRUE(q8_scale_is_valid(0x0000));
  EXPECT_TRUE(q8_scale_is_valid(0x8000));
  EXPECT_TRUE(q8_scale_is_valid(0x7bff));
  EXPECT_FALSE(q8_scale_is_valid(0x7c00));
  EXPECT_FALSE(q8_scale_is_valid(0x8001));
}

}  // namespace
}  // namespace larql::wire
