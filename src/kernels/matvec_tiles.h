// Internal to matvec.cc and its ISA files: one tile of a matmul and the lane reduction
// every version shares.
#pragma once

#include <cstddef>

#include "kernels/block_dot.h"
#include "kernels/dtype.h"

namespace larql {

// Rows [r0, r0 + nr) of w against tokens [t0, t0 + nt) of x, into y ([n][w.rows]).
struct Tile {
  const Matrix* w;
  const float* x;
  float* y;
  size_t r0, nr, t0, nt;
  const QuantizedActivations* qa = nullptr;  // x quantised, for block-format weights
};

// The fixed reduction tree over sixteen lanes: i + (i+8), then + (i+4), + (i+2), + (i+1).
inline float reduce16(const float* l) {
  float a[8], b[4], c[2];
  for (int i = 0; i < 8; ++i) a[i] = l[i] + l[i + 8];
  for (int i = 0; i < 4; ++i) b[i] = a[i] + a[i + 4];
  for (int i = 0; i < 2; ++i) c[i] = b[i] + b[i + 2];
  return c[0] + c[1];
}

#if defined(__x86_64__)
void tile_avx2(const Tile& t);    // nr ≤ 4 with nt = 1, else nr, nt ≤ 2
void tile_avx512(const Tile& t);  // nr ≤ 8 with nt = 1, else nr, nt ≤ 4
// Block-format weights (block_dot.h's contract), same tile limits.
void block_tile_avx2(const Tile& t);    // nr ≤ 4 with nt = 1, else nr, nt ≤ 2
void block_tile_vnni(const Tile& t);      // AVX-512 VNNI: nr ≤ 8 with nt = 1, else nr, nt ≤ 4
void block_tile_avx512bw(const Tile& t);  // AVX-512 without VNNI: the same limits
#endif

}  // namespace larql
