// The SIMD kernels against the scalar oracle: f16 bit for bit in both directions, i8
// quantisation equal except where x/scale sits within a rounding error of a .5 tie.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cctype>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "base/f16.h"
#include "support/random_values.h"
#include "wire/kernels.h"

namespace larql::wire {
namespace {

const WireKernels& scalar() { return scalar_kernels(); }

// Every SIMD table this CPU runs (LARQL_CPU_MASK hides some), each against the scalar oracle.
std::vector<const WireKernels*> simd_tables() {
  auto tables = supported_kernels();
  tables.erase(tables.begin());  // the scalar oracle itself
  return tables;
}

class Kernels : public ::testing::TestWithParam<const WireKernels*> {
 protected:
  const WireKernels& simd() const { return *GetParam(); }
};
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(Kernels);  // a CPU (or mask) without AVX2 has no SIMD table

INSTANTIATE_TEST_SUITE_P(Supported, Kernels, ::testing::ValuesIn(simd_tables()),
                         [](const auto& info) {
                           std::string name;
                           for (char c : std::string(info.param->name)) name += std::isalnum(c) ? c : '_';
                           return name;
                         });

TEST(KernelDispatch, BestIsTheWidestSupportedAndTheUncheckedAreNamed) {
  const auto tables = supported_kernels();
  std::printf("wire kernels in use: %s (of %zu supported)\n", best_kernels().name, tables.size());
  EXPECT_EQ(&best_kernels(), tables.back());
  EXPECT_STREQ(tables.front()->name, "scalar");
  const char* all[] = {"avx2+f16c+fma", "avx2+f16c+fma, avx512bw i8/q8"};
  for (const char* name : all)
    if (std::none_of(tables.begin(), tables.end(), [&](const WireKernels* k) { return std::string(k->name) == name; }))
      std::printf("NOT CHECKED on this CPU%s: wire kernel table '%s'\n", std::getenv("LARQL_CPU_MASK") ? " (masked)" : "", name);
  if (const char* mask = std::getenv("LARQL_CPU_MASK")) {  // the mask must really hide what it names
    const std::string items = std::string(",").append(mask).append(",");
    for (const WireKernels* k : tables) {
      if (items.find(",avx512,") != std::string::npos) {
        EXPECT_EQ(std::string(k->name).find("avx512"), std::string::npos);
      }
      if (items.find(",avx2,") != std::string::npos) {
        EXPECT_STREQ(k->name, "scalar");
      }
    }
  }
}

TEST_P(Kernels, F16EncodeMatchesScalarForEveryF32Class) {
  std::vector<float> in;
  std::mt19937 rng(3);
  // Random bit patterns cover subnormals, ties, overflow, NaN payloads and signs.
  for (int i = 0; i < 200000; ++i) in.push_back(std::bit_cast<float>(static_cast<uint32_t>(rng())));
  for (float v : {0.0f, -0.0f, 65504.0f, 65519.996f, 65520.0f, 0x1p-24f, 0x1p-25f, 0x1.8p-25f, 0x1p-14f, 1.0f + 0x1p-11f,
                  1.0f + 0x3p-11f, INFINITY, -INFINITY})
    in.push_back(v);
  std::vector<uint8_t> a(in.size() * 2), b(in.size() * 2);
  EXPECT_EQ(scalar().encode_f16(in.data(), in.size(), a.data()), simd().encode_f16(in.data(), in.size(), b.data()));
  for (size_t i = 0; i < in.size(); ++i) {
    uint16_t ha, hb;
    std::memcpy(&ha, &a[2 * i], 2);
    std::memcpy(&hb, &b[2 * i], 2);
    if ((ha & 0x7fff) > 0x7c00 && (hb & 0x7fff) > 0x7c00) continue;  // both NaN: payloads may differ
    ASSERT_EQ(ha, hb) << "value " << in[i] << " bits " << std::bit_cast<uint32_t>(in[i]);
  }
}

TEST_P(Kernels, F16DecodeIsExactForAllHalfValues) {
  std::vector<uint8_t> in(65536 * 2);
  for (uint32_t h = 0; h < 65536; ++h) {
    in[2 * h] = h & 0xff;
    in[2 * h + 1] = h >> 8;
  }
  std::vector<float> a(65536), b(65536);
  EXPECT_FALSE(scalar().decode_f16(in.data(), 65536, a.data()));  // the table holds inf/NaN
  EXPECT_FALSE(simd().decode_f16(in.data(), 65536, b.data()));
  for (uint32_t h = 0; h < 65536; ++h) {
    if (!f16_is_finite(static_cast<uint16_t>(h))) continue;
    ASSERT_EQ(std::bit_cast<uint32_t>(a[h]), std::bit_cast<uint32_t>(b[h])) << h;
    ASSERT_EQ(f32_to_f16(a[h]), h) << "f16 → f32 → f16 must be the identity";
  }
}

TEST_P(Kernels, F16FitsFlagOnlyForFiniteInRangeData) {
  for (size_t n : {1u, 7u, 8u, 33u, 1000u}) {
    std::vector<float> in = test::random_rows(1, n, n, 100.0f);
    std::vector<uint8_t> out(2 * n);
    EXPECT_TRUE(simd().encode_f16(in.data(), n, out.data()));
    in[n - 1] = 1e5f;
    EXPECT_FALSE(simd().encode_f16(in.data(), n, out.data())) << n;
  }
}

TEST_P(Kernels, I8MatchesScalarExceptAtNearTies) {
  for (size_t hidden : {1u, 5u, 31u, 32u, 33u, 64u, 4096u, 5120u}) {
    const auto values = test::random_rows(8, hidden, static_cast<uint32_t>(hidden));
    const size_t block = 8 + hidden;
    std::vector<uint8_t> a(block), b(block);
    for (size_t r = 0; r < 8; ++r) {
      const float* row = values.data() + r * hidden;
      ASSERT_TRUE(scalar().encode_i8_row(row, hidden, a.data()));
      ASSERT_TRUE(simd().encode_i8_row(row, hidden, b.data()));
      ASSERT_EQ(std::memcmp(a.data(), b.data(), 8), 0) << "scale and zero_point must match";
      float scale;
      std::memcpy(&scale, a.data(), 4);
      for (size_t i = 0; i < hidden; ++i) {
        const int qa = static_cast<int8_t>(a[8 + i]), qb = static_cast<int8_t>(b[8 + i]);
        if (qa == qb) continue;
        // Only a value within float rounding of the midpoint between two steps may differ.
        const double exact = double(row[i]) / double(scale);
        EXPECT_LT(std::fabs(std::fabs(exact - std::trunc(exact)) - 0.5), 1e-4)
            << "hidden " << hidden << " row " << r << " index " << i << ": " << qa << " vs " << qb;
        EXPECT_EQ(std::abs(qa - qb), 1);
      }
    }
  }
}

TEST_P(Kernels, I8TiesGoAwayFromZeroInTheVectorBody) {
  // §10's edge case tiled to 64 values so the 32-wide SIMD loop handles it.
  const float pattern[] = {127, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 126.5};
  const int8_t expected[] = {127, 1, -1, 2, -2, 3, -3, 127};
  std::vector<float> row;
  for (int i = 0; i < 8; ++i) row.insert(row.end(), std::begin(pattern), std::end(pattern));
  std::vector<uint8_t> block(8 + row.size());
  ASSERT_TRUE(simd().encode_i8_row(row.data(), row.size(), block.data()));
  for (size_t i = 0; i < row.size(); ++i) EXPECT_EQ(static_cast<int8_t>(block[8 + i]), expected[i % 8]) << i;
}

TEST_P(Kernels, I8RejectsNonFiniteRowsAndHandlesTinyMaxima) {
  for (const WireKernels* k : {&scalar(), &simd()}) {
    std::vector<float> row(100, 1.0f);
    std::vector<uint8_t> block(108);
    for (float bad : {NAN, INFINITY, -INFINITY}) {
      row[97] = bad;
      EXPECT_FALSE(k->encode_i8_row(row.data(), row.size(), block.data())) << k->name;
      row[3] = bad;
      row[97] = 1.0f;
      EXPECT_FALSE(k->encode_i8_row(row.data(), row.size(), block.data())) << k->name;
      row[3] = 1.0f;
    }
    // A subnormal row maximum: 127 / max overflows, the kernel must still quantise.
    std::vector<float> tiny(40, 0.0f);
    tiny[5] = 1e-40f;
    tiny[6] = -5e-41f;
    ASSERT_TRUE(k->encode_i8_row(tiny.data(), tiny.size(), block.data())) << k->name;
    float scale;
    std::memcpy(&scale, block.data(), 4);
    EXPECT_EQ(static_cast<int8_t>(block[8 + 5]), 127) << k->name;
    const float decoded = static_cast<int8_t>(block[8 + 6]) * scale;
    EXPECT_LE(std::fabs(decoded - tiny[6]), scale / 2 + std::numeric_limits<float>::denorm_min()) << k->name;
  }
}

TEST_P(Kernels, DecodeI8MatchesScalar) {
  std::vector<uint8_t> q(77);
  for (size_t i = 0; i < q.size(); ++i) q[i] = static_cast<uint8_t>(i * 37);
  std::vector<float> a(q.size()), b(q.size());
  scalar().decode_i8_row(q.data(), q.size(), 0.0123f, a.data());
  simd().decode_i8_row(q.data(), q.size(), 0.0123f, b.data());
  EXPECT_EQ(a, b);
}

TEST_P(Kernels, F32CopyFlagsNonFinite) {
  std::vector<float> in = test::random_rows(1, 100, 1);
  std::vector<uint8_t> bytes(400);
  std::vector<float> back(100);
  EXPECT_TRUE(simd().encode_f32(in.data(), 100, bytes.data()));
  EXPECT_TRUE(simd().decode_f32(bytes.data(), 100, back.data()));
  EXPECT_EQ(in, back);
  in[50] = NAN;
  EXPECT_FALSE(simd().encode_f32(in.data(), 100, bytes.data()));
  EXPECT_FALSE(simd().decode_f32(bytes.data(), 100, back.data()));
}

}  // namespace
}  // namespace larql::wire
