// Products with K-quant weights (q4_k, q5_k, q6_k): the "q8k" contract. Each row of
// activations is quantised per 256-value super-block, and a weight super-block meets its
// activations in integer sums before one float step, as llama.cpp's K-quant dot products
// do. The scalar, AVX2 (with and without AVX-VNNI) and AVX-512 versions follow it bit for
// bit:
//
//   activations: per super-block of 256, dx = max|x| / 127 (f32), qx = x · (1/dx)
//                rounded to nearest even, clamped to [−127, 127] (0 when dx is 0 or 1/dx
//                is infinite, as for super-blocks below ~4e-37; dx NaN when the
//                super-block is not finite), and b_i = Σ qx over values 16i .. 16i + 15
//   weights:     per super-block, block_formats.h's integers n (q4_k 0..15, q5_k 0..31,
//                q6_k 0..63, the zero point not yet taken off), scales sc and minimums m
//   integers:    per row, token and super-block, exact in int32 in any order:
//                  q4_k, q5_k: S = Σ_k sc_k · Σ_{32 values of block k} n·qx
//                              M = Σ_k m_k · (b_2k + b_2k+1)
//                  q6_k:       S = Σ_i sc_i · (Σ_{16 values of group i} n·qx − 32·b_i)
//   float steps: in super-block order, one accumulator per row and token from +0:
//                  dd = d·dx (one rounding); acc = fma(dd, float(S), acc)
//                  dm = dmin·dx;             acc = fma(−dm, float(M), acc)   (q4_k, q5_k)
//
// The result depends only on the row and the token's activations: prefill equals token by
// token, and remote equals local. It is a range's "q8k" arithmetic (PROTOCOL §8).
//
// One activation scale per 256 values rounds more coarsely than the 32-value formats' one
// per 32 (1.3× their product error on Gaussian inputs, llama.cpp's own); the contracts that
// would not were measured slower. docs/benchmarks.md, "K-quant decode on compute-bound
// CPUs", has both.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/thread_pool.h"

namespace larql {

namespace q8k {
inline constexpr size_t kValues = 256;  // values per super-block
inline constexpr size_t kGroup = 16;    // values per activation sum b_i

// The integers' bounds (the contract's int32 sums cannot overflow): 256 values of the
// largest weight integer times 127 times the largest scale, and the minimums' 8 blocks of
// 32 · 127 times 63.
static_assert(63LL * 15 * 127 * 256 <= INT32_MAX);   // q4_k: 30,723,840
static_assert(63LL * 31 * 127 * 256 <= INT32_MAX);   // q5_k: 63,495,936
static_assert(128LL * 32 * 127 * 256 <= INT32_MAX);  // q6_k: 133,169,152 (|n − 32| ≤ 32, |sc| ≤ 128)
static_assert(63LL * 32 * 127 * 8 <= INT32_MAX);     // M: 2,048,256
}  // namespace q8k

// Rows of activations quantised per super-block.
struct SuperBlockActivations {
  size_t rows = 0, cols = 0, supers = 0;  // super-blocks per row = cols / 256
  std::vector<int8_t> q;                  // [rows][cols] qx
  std::vector<float> scale;               // [rows][supers] dx
  std::vector<int16_t> sums;              // [rows][cols / 16] b_i

  // Sizes the arrays for rows × cols (cols a multiple of 256) and quantises x, the rows
  // spread over the pool; with simd, by the AVX2 version (the same numbers bit for bit).
  void quantize(const float* x, size_t rows, size_t cols, bool simd, ThreadPool& pool);
  const int8_t* row_q(size_t row) const { return &q[row * cols]; }
  const float* row_scales(size_t row) const { return &scale[row * supers]; }
  const int16_t* row_sums(size_t row) const { return &sums[row * (cols / q8k::kGroup)]; }
};

// Row r of SuperBlockActivations::quantize, its arrays sized.
void quantize_super_block_row_scalar(const float* x, SuperBlockActivations& qa, size_t r);
#if defined(__x86_64__)
void quantize_super_block_row_avx2(const float* x, SuperBlockActivations& qa, size_t r);
#endif

}  // namespace larql
