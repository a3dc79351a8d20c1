// Products with GGML's 32-value block-format weights (q8_0, q4_0, q4_1, q5_0, q5_1, mxfp4),
// llama.cpp's way: each row of activations is quantised to 8-bit blocks of 32, and each
// weight block meets its activation block in an exact integer dot product. (The K-quants
// have a contract of their own, by super-block: kquant_dot.h.) The contract, which the scalar,
// AVX2 and AVX-512 VNNI versions all follow bit for bit:
//
//   activations: per block of 32, dx = max|x| / 127 (f32), qx = x · (1/dx) rounded to
//                nearest even (0 when dx is 0 or 1/dx is infinite, as for blocks below
//                ~4e-37; dx NaN when the block is not finite)
//   weights:     per block, the integers qw (-128..127) and per group g of four values
//                the scale dw_g (and minimum mw_g) of block_formats.h's unpack_block,
//                so that weight = dw_g · qw (+ mw_g); both exact in f32
//   groups:      p_g = Σ qw·qx over values 4g .. 4g+3 (g < 8), exact in int32;
//                sx_g = Σ qx over the same values
//   lanes:       block b adds to lane L = 8·(b mod 2) + g, in this order,
//                   lane[L] = fma(dw_g·dx, float(p_g), lane[L])
//                   lane[L] = fma(mw_g·dx, float(sx_g), lane[L])    (q4_1, q5_1)
//   result:      the sixteen lanes reduced by matvec_tiles.h's fixed tree
//
// The result depends only on the row and the token's activations, never on the ISA,
// the thread count or the tile: prefill equals token by token, and remote equals local.
// It approximates the float product by the activations' 8-bit rounding on top of the
// format's own (docs/benchmarks/history.md measures both).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <cstdint>
#include <vector>

#include "kernels/block_formats.h"
#include "kernels/thread_pool.h"

namespace larql {

// Rows of activations in the form the block kernels read. The group sums are kept once
// per lane, eight lanes per block, as the AVX-512 tiles load them two blocks at a time
// (lanes 0-7 the even block, 8-15 the odd one). A block's dx is kept once: the tiles
// spread a pair's two over the lanes in registers (a lane copy of each read from L2 cost
// the Q8_0 prefill tile a sixth of its time, docs/benchmarks/history.md).
struct QuantizedActivations;

// A block's (or super-block's) scale dx from its largest magnitude, and the factor its
// values are multiplied by before rounding: dx NaN when the values are not all finite;
// the factor 0 when dx is 0 or so small that 1/dx overflows (x · ∞ could be 0 · ∞).
struct ActivationScale {
  float d, inverse;
};
inline ActivationScale activation_scale(float amax, bool finite) {
  if (!finite) return {std::numeric_limits<float>::quiet_NaN(), 0.0f};
  const float d = amax / 127;
  const float inverse = d != 0 ? 1.0f / d : 0.0f;
  return {d, std::isinf(inverse) ? 0.0f : inverse};
}

// Round to nearest even, for |v| ≤ 127 (a little more after the product's rounding):
// adding and subtracting 1.5 · 2^23 leaves the integer the float unit's rounding chose.
// Inline arithmetic, unlike nearbyint's library call (this runs for every activation);
// exact IEEE arithmetic, which the build keeps (no -ffast-math).
inline int8_t round_to_int8(float v) {
  constexpr float kMagic = 12582912.0f;
  const float r = (std::clamp(v, -127.0f, 127.0f) + kMagic) - kMagic;
  return int8_t(r);
}

// n values quantised to 8 bits with one scale, the way both block contracts do it (the
// scalar version): qx into q, and dx returned.
inline float quantize_to_int8(const float* v, size_t n, int8_t* q) {
  float amax = 0;
  bool finite = true;
  for (size_t i = 0; i < n; ++i) {
    finite = finite && std::isfinite(v[i]);
    amax = std::max(amax, std::fabs(v[i]));
  }
  const auto [d, inverse] = activation_scale(amax, finite);
  for (size_t i = 0; i < n; ++i) q[i] = finite ? round_to_int8(v[i] * inverse) : 0;
  return d;
}

struct QuantizedActivations {
  size_t rows = 0, cols = 0, blocks = 0;  // blocks per row = cols / 32
  size_t lane_stride = 0;                 // floats per row of lane_group_sum: 8 per block, blocks rounded up to pairs
  std::vector<int8_t> q;                  // [rows][cols] qx
  std::vector<float> block_scale;         // [rows][blocks] block b's dx
  std::vector<float> lane_group_sum;      // [rows][lane_stride] float(sx_g) at 8b + g (0 past the last block)

  // Sizes the arrays for rows × cols and quantises x, the rows spread over the pool; with
  // simd, by the AVX2 version (the same numbers bit for bit as the scalar one).
  void quantize(const float* x, size_t rows, size_t cols, bool simd, ThreadPool& pool);
  float scale(size_t row, size_t b) const { return block_scale[row * blocks + b]; }
  const float* scales(size_t row, size_t b) const { return &block_scale[row * blocks + b]; }  // from block b on
  const float* group_sums(size_t row, size_t b) const { return &lane_group_sum[row * lane_stride + 8 * b]; }
};

}  // namespace larql
