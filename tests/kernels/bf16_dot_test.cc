// The bf16-dot arithmetic (bf16_dot.h): the scalar oracle is what the CPU's instructions
// compute, and every tile (the instruction itself, its AVX-512 and AVX2 emulations)
// equals the oracle bit for bit, for any thread count and any chunking of the tokens.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#if defined(__x86_64__)
#include "base/simd_avx512.h"
#endif

#include "base/cpu_features.h"
#include "kernels/bf16_dot.h"
#include "kernels/matvec.h"
#include "kernels/thread_pool.h"
#include "support/float_bits.h"

namespace larql {
namespace {

using test::same_bits_or_both_nan;

// Random 32-bit patterns that land on the edge cases often: subnormals, zeros of both
// signs, infinities, NaNs, and exponents near the ends of the range.
uint32_t edgy_bits(std::mt19937& rng) {
  uint32_t b = rng();
  switch (rng() % 6) {
    case 0: return b & 0x807fffffu;                                  // zero or subnormal
    case 1: return (b & 0x807fffffu) | (uint32_t(rng() % 3) << 23);  // the smallest normals
    case 2: return b | 0x7f000000u;                                  // huge, infinite or NaN
    default: return b;
  }
}

#if defined(__x86_64__)
LARQL_AVX512_TARGET("avx512f,avx512bf16") void hardware_chunk(const uint16_t* w, const uint16_t* x, float* lanes) {
  const __m512 acc = _mm512_loadu_ps(lanes);
  const __m512i wv = _mm512_loadu_si512(w), xv = _mm512_loadu_si512(x);
  _mm512_storeu_ps(lanes, _mm512_dpbf16_ps(acc, (__m512bh)wv, (__m512bh)xv));
}

LARQL_AVX512_TARGET("avx512f,avx512bf16") void hardware_round(const float* x, uint16_t* out) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(x)));
}
#endif

TEST(Bf16Dot, TheOracleIsWhatTheInstructionsCompute) {
#if defined(__x86_64__)
  if (!cpu_has_avx512_bf16()) {
    std::printf("NOT CHECKED on this CPU: the oracle against vdpbf16ps and vcvtneps2bf16 (no AVX512_BF16)\n");
    return;
  }
  std::mt19937 rng(1);
  for (int it = 0; it < 20000; ++it) {
    uint16_t w[32], x[32];
    float lanes[16], expected[16];
    for (int i = 0; i < 32; ++i) {
      w[i] = uint16_t(edgy_bits(rng) >> 16);
      x[i] = uint16_t(edgy_bits(rng) >> 16);
    }
    // The oracle's lanes are never subnormal (they come from ftz); the instruction is fed
    // what the oracle can produce.
    for (float& l : lanes) l = bf16dot::flush_subnormal(std::bit_cast<float>(edgy_bits(rng)));
    std::memcpy(expected, lanes, sizeof lanes);
    bf16dot::chunk_scalar(w, x, expected);
    hardware_chunk(w, x, lanes);
    for (int i = 0; i < 16; ++i) ASSERT_TRUE(same_bits_or_both_nan(lanes[i], expected[i])) << "iteration " << it << " lane " << i;

    float values[16];
    uint16_t rounded[16];
    for (float& v : values) v = std::bit_cast<float>(edgy_bits(rng));
    hardware_round(values, rounded);
    for (int i = 0; i < 16; ++i) ASSERT_EQ(rounded[i], bf16dot::round_activation(values[i])) << values[i];
  }
#else
  std::printf("NOT CHECKED on this CPU: the oracle against vdpbf16ps (not x86)\n");
#endif
}

TEST(Bf16Dot, RoundingIsNearestEvenAndFlushesSubnormals) {
  EXPECT_EQ(bf16dot::round_activation(1.0f), 0x3f80);
  EXPECT_EQ(bf16dot::round_activation(std::bit_cast<float>(0x3f808000u)), 0x3f80);  // tie to even (down)
  EXPECT_EQ(bf16dot::round_activation(std::bit_cast<float>(0x3f818000u)), 0x3f82);  // tie to even (up)
  EXPECT_EQ(bf16dot::round_activation(std::bit_cast<float>(0x3f808001u)), 0x3f81);
  EXPECT_EQ(bf16dot::round_activation(std::bit_cast<float>(0x00400000u)), 0x0000);  // subnormal
  EXPECT_EQ(bf16dot::round_activation(std::bit_cast<float>(0x80400000u)), 0x8000);
  EXPECT_EQ(bf16dot::round_activation(std::bit_cast<float>(0x7f7fffffu)), 0x7f80);  // rounds up to infinity
  EXPECT_EQ(bf16dot::round_activation(std::bit_cast<float>(0x7f800001u)), 0x7fc0);  // NaN stays NaN, quiet
}

struct Bf16Matrix {
  std::vector<uint16_t> values;
  Matrix m;
};

Bf16Matrix random_bf16(size_t rows, size_t cols, uint32_t seed, bool edgy) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0, 1);
  Bf16Matrix s;
  s.values.resize(rows * cols);
  for (auto& v : s.values) v = edgy ? uint16_t(edgy_bits(rng) >> 16) : f32_to_bf16(normal(rng));
  s.m = Matrix{DType::bf16, rows, cols, s.values.data(), Arithmetic::bf16_dot};
  return s;
}

std::vector<float> random_rows(size_t n, uint32_t seed, bool edgy) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0, 1);
  std::vector<float> v(n);
  for (float& x : v) x = edgy ? std::bit_cast<float>(edgy_bits(rng)) : normal(rng);
  return v;
}

std::vector<MatmulIsa> isas_here() {
  std::vector<MatmulIsa> isas;
  for (MatmulIsa isa : {MatmulIsa::avx2, MatmulIsa::avx512, MatmulIsa::avx512bf16})
    if (isa <= best_matmul_isa()) isas.push_back(isa);
    else std::printf("NOT CHECKED on this CPU: the bf16-dot tiles of matmul isa %d\n", int(isa));
  return isas;
}

TEST(Bf16Dot, EveryIsaEqualsTheScalarOracleBitForBit) {
  ThreadPool pool(2);
  const auto isas = isas_here();
  for (bool edgy : {false, true})
    for (size_t cols : {1u, 7u, 16u, 31u, 32u, 33u, 100u, 2048u, 2080u}) {
      auto w = random_bf16(11, cols, uint32_t(cols), edgy);
      for (size_t n : {1u, 2u, 3u, 5u, 7u, 13u, 29u}) {  // 29: a full AVX2 prefill tile (24) and groups of 2, 2, 1
        auto x = random_rows(n * cols, uint32_t(7 + n), edgy);
        std::vector<float> reference(n * 11);
        matmul_with(MatmulIsa::scalar, w.m, x.data(), n, reference.data(), pool);
        for (MatmulIsa isa : isas) {
          std::vector<float> y(n * 11);
          matmul_with(isa, w.m, x.data(), n, y.data(), pool);
          for (size_t i = 0; i < y.size(); ++i)
            ASSERT_TRUE(same_bits_or_both_nan(y[i], reference[i]))
                << "cols " << cols << " n " << n << " isa " << int(isa) << " edgy " << edgy << " at " << i << ": "
                << y[i] << " vs " << reference[i];
        }
        if (edgy) continue;
        // And it is a dot product of the weights with each token's activations rounded to bf16.
        for (size_t j = 0; j < n; ++j)
          for (size_t r = 0; r < 11; ++r) {
            double exact = 0, magnitude = 0;
            for (size_t k = 0; k < cols; ++k) {
              const double p =
                  double(bf16_to_f32(w.values[r * cols + k])) * bf16_to_f32(bf16dot::round_activation(x[j * cols + k]));
              exact += p;
              magnitude += std::fabs(p);
            }
            EXPECT_NEAR(reference[j * 11 + r], exact, 1e-5 * magnitude + 1e-7) << "cols " << cols << " token " << j << " row " << r;
          }
      }
    }
}

// Only the lanes' steps flush subnormals (ftz, daz); the final tree is plain f32 adds.
// Lane 0 holds 2^-125 and lane 8 -1.75 · 2^-126, both normal; the tree's first add gives
// 2^-128, a subnormal, which every ISA must keep (the emulations flush their steps'
// results through MXCSR, which must not cover the reduction).
TEST(Bf16Dot, TheLanesTreeKeepsASubnormalSum) {
  ThreadPool pool(2);
  constexpr size_t kRows = 6, kCols = 32;
  std::vector<uint16_t> values(kRows * kCols, 0);
  for (size_t r = 0; r < kRows; ++r) {
    values[r * kCols + 0] = 0x3f80;   // 1
    values[r * kCols + 16] = 0xbf80;  // -1
  }
  const Matrix w{DType::bf16, kRows, kCols, values.data(), Arithmetic::bf16_dot};
  const float expected = std::ldexp(1.0f, -128);
  for (size_t n : {1u, 4u}) {
    std::vector<float> x(n * kCols, 0.0f);
    for (size_t j = 0; j < n; ++j) {
      x[j * kCols + 0] = std::ldexp(1.0f, -125);
      x[j * kCols + 16] = std::ldexp(1.75f, -126);
    }
    std::vector<MatmulIsa> isas = isas_here();
    isas.push_back(MatmulIsa::scalar);
    for (MatmulIsa isa : isas) {
      std::vector<float> y(n * kRows);
      matmul_with(isa, w, x.data(), n, y.data(), pool);
      for (size_t i = 0; i < y.size(); ++i)
        EXPECT_TRUE(same_bits_or_both_nan(y[i], expected)) << "isa " << int(isa) << " tokens " << n << " output " << i << ": " << y[i];
    }
  }
}

TEST(Bf16Dot, RoundedActivationsHoldEachTokensRoundedValuesWithEitherRounding) {
  ThreadPool pool(2);
  // Every implementation this CPU runs: with AVX512_BF16 masked (CMakeLists.txt) the AVX2
  // one is the widest.
  std::vector<MatmulIsa> isas{MatmulIsa::scalar};
  if (best_matmul_isa() >= MatmulIsa::avx2) isas.push_back(MatmulIsa::avx2);
  else std::printf("NOT CHECKED on this CPU: the AVX2 rounding of activations\n");
  if (best_matmul_isa() == MatmulIsa::avx512bf16) isas.push_back(MatmulIsa::avx512bf16);
  else std::printf("NOT CHECKED on this CPU: the vcvtneps2bf16 rounding of activations (no AVX512_BF16)\n");
  for (size_t cols : {1u, 31u, 32u, 33u, 100u, 1000u})
    for (size_t n : {1u, 5u, 40u}) {  // 40 tokens of 1000: spread over the pool
      auto x = random_rows(n * cols, uint32_t(cols + n), true);
      for (MatmulIsa isa : isas) {
        bf16dot::RoundedActivations rounded;
        rounded.round(x.data(), n, cols, isa, pool);
        for (size_t t = 0; t < n; ++t)
          for (size_t k = 0; k < bf16dot::padded(cols); ++k) {
            const uint16_t expected = k < cols ? bf16dot::round_activation(x[t * cols + k]) : uint16_t{0};
            ASSERT_EQ(rounded.chunk(t, k / bf16dot::kChunk)[k % bf16dot::kChunk], expected)
                << "cols " << cols << " n " << n << " token " << t << " value " << k << " isa " << int(isa);
          }
      }
    }
}

TEST(Bf16Dot, RowsEqualMatvecAcrossThreadCountsAndTokenBlocks) {
  // 700 tokens of 1000 values: more than one block of activations (matvec.cc), so the
  // rows are read once per block.
  const size_t rows = 70, cols = 1000, n = 700;
  auto w = random_bf16(rows, cols, 3, false);
  auto x = random_rows(n * cols, 4, false);
  std::vector<float> reference(n * rows);
  ThreadPool one(1);
  for (size_t i = 0; i < n; ++i) matvec(w.m, &x[i * cols], &reference[i * rows], one);
  for (size_t threads : {1u, 2u, 3u}) {
    ThreadPool pool(threads);
    std::vector<float> y(n * rows);
    matmul(w.m, x.data(), n, y.data(), pool);
    EXPECT_EQ(y, reference) << threads << " threads";
  }
}

TEST(Bf16Dot, TheArithmeticIsTheMatrixsChoice) {
  ThreadPool pool(1);
  auto w = random_bf16(3, 64, 5, false);
  auto x = random_rows(64, 6, false);
  x[0] = 1.001f;  // not a bf16 value: the two arithmetics must read it differently
  std::vector<float> dot(3), exact(3);
  matvec(w.m, x.data(), dot.data(), pool);
  Matrix f32 = w.m;
  f32.arithmetic = Arithmetic::f32;
  matvec(f32, x.data(), exact.data(), pool);
  EXPECT_NE(dot, exact);
  EXPECT_EQ(arithmetic_name(w.m.effective_arithmetic()), "bf16-dot");
  EXPECT_EQ(arithmetic_from_name("bf16-dot"), Arithmetic::bf16_dot);
  EXPECT_EQ(arithmetic_from_name("f32"), Arithmetic::f32);
  EXPECT_FALSE(arithmetic_from_name("bf16"));
  Matrix f16 = w.m;
  f16.dtype = DType::f16;
  EXPECT_EQ(f16.effective_arithmetic(), Arithmetic::f32) << "only bf16 weights have a choice";
}

}  // namespace
}  // namespace larql
