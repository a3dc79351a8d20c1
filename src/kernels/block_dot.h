// Products with GGML block-format weights (q8_0, q4_0, q4_1, q5_0, q5_1), llama.cpp's way:
// each row of activations is quantised to 8-bit blocks of 32, and each weight block meets
// its activation block in an exact integer dot product. The contract, which the scalar,
// AVX2 and AVX-512 VNNI versions all follow bit for bit:
//
//   activations: per block of 32, dx = max|x| / 127 (f32), qx = x · (1/dx) rounded to
//                nearest even (0 when dx is 0; dx NaN when the block is not finite)
//   weights:     per block, the integers qw (-128..127) and the f16 scale dw (and
//                minimum mw) of block_formats.h, so that weight = dw · qw (+ mw)
//   groups:      p_g = Σ qw·qx over values 4g .. 4g+3 (g < 8), exact in int32;
//                sx_g = Σ qx over the same values
//   lanes:       block b adds to lane L = 8·(b mod 2) + g, in this order,
//                   lane[L] = fma(dw·dx, float(p_g), lane[L])
//                   lane[L] = fma(mw·dx, float(sx_g), lane[L])      (q4_1, q5_1 only)
//   result:      the sixteen lanes reduced by matvec_tiles.h's fixed tree
//
// The result depends only on the row and the token's activations, never on the ISA,
// the thread count or the tile: prefill equals token by token, and remote equals local.
// It approximates the float product by the activations' 8-bit rounding on top of the
// format's own (docs/benchmarks.md measures both).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/dtype.h"

namespace larql {

// Rows of activations in the form the block kernels read.
struct QuantizedActivations {
  size_t rows = 0, cols = 0, blocks = 0;  // blocks per row = cols / 32
  std::vector<int8_t> q;        // [rows][cols] qx
  std::vector<int16_t> wide;    // [rows][cols] qx as int16 (AVX2's madd)
  std::vector<float> scale;     // [rows][blocks] dx
  std::vector<float> group_sum; // [rows][blocks][8] float(sx_g)
  // AVX-512 works on pairs of blocks (lanes 0-7 the even block, 8-15 the odd one):
  std::vector<float> pair_scale;      // [rows][pairs][16] dx of each lane's block (0 past the last block)
  std::vector<float> pair_group_sum;  // [rows][pairs][16] sx_g of each lane

  void quantize(const float* x, size_t rows, size_t cols);
};

// The integers and scales of one weight block (the scalar reading of block_formats.h).
struct UnpackedBlock {
  int8_t q[32];
  float scale, min;  // min is 0 for the formats without one
};
UnpackedBlock unpack_block(DType t, const uint8_t* block);
inline bool has_min(DType t) { return t == DType::q4_1 || t == DType::q5_1; }

// Calls fn.template operator()<T>() with the block format t as a compile-time value
// (the ISA files' tile tables); does nothing for the element formats.
template <typename Fn>
void with_block_format(DType t, Fn&& fn) {
  switch (t) {
    case DType::q8_0: return fn.template operator()<DType::q8_0>();
    case DType::q4_0: return fn.template operator()<DType::q4_0>();
    case DType::q4_1: return fn.template operator()<DType::q4_1>();
    case DType::q5_0: return fn.template operator()<DType::q5_0>();
    case DType::q5_1: return fn.template operator()<DType::q5_1>();
    case DType::f32:
    case DType::f16:
    case DType::bf16: return;
  }
}

}  // namespace larql
