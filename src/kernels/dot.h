// One dot product of two f32 vectors, summed as matvec.h sums f32 weights: sixteen lanes,
// lane i taking a[k]·b[k] for k ≡ i (mod 16) in increasing k by fused multiply-add (the
// tail zero-padded), then the fixed reduce16 tree. Every ISA gives the same bits. Used for
// attention's scores q·k, where a scalar loop would be one add at a time.
#pragma once

#include <cstddef>

#include "kernels/matvec.h"

namespace larql {

float dot(const float* a, const float* b, size_t n);

// The same with a given implementation (tests compare them).
float dot_with(MatmulIsa isa, const float* a, const float* b, size_t n);

// Rows of floats inside a wider buffer: row r starts at data + r · stride.
struct StridedRows {
  const float* data;
  size_t count, stride;
  const float* row(size_t r) const { return data + r * stride; }
};

// Attention's scores for queries that share their keys (the heads of one key-value head):
// out[j · out_stride + r] = dot(queries.row(j), keys.row(r), n), the same bits as one dot()
// per pair, each key read once for all the queries.
void dots(StridedRows queries, StridedRows keys, size_t n, float* out, size_t out_stride);
void dots_with(MatmulIsa isa, StridedRows queries, StridedRows keys, size_t n, float* out, size_t out_stride);

// out[j · n + i] = Σ_r weights.row(j)[r] · values.row(r)[i] for i < n and r < values.count,
// from zero in increasing r, each term its rounded product added as the scalar
// `out[i] += w[r] * v[...]` adds it (no fused multiply-add): the same bits on every ISA
// (attention's weighted sums of values, one per head that shares them).
void weighted_sum(StridedRows weights, StridedRows values, size_t n, float* out);
void weighted_sum_with(MatmulIsa isa, StridedRows weights, StridedRows values, size_t n, float* out);

}  // namespace larql
