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

// out[r] = dot(q, keys + r · stride, n) for r < count: the same bits as one dot() per
// key, several keys at a time (attention's scores for one query).
void dots(const float* q, const float* keys, size_t stride, size_t count, size_t n, float* out);
void dots_with(MatmulIsa isa, const float* q, const float* keys, size_t stride, size_t count, size_t n, float* out);

// out[i] = Σ_r w[r] · v[r · stride + i] for i < n, from zero in increasing r, each term
// its rounded product added as the scalar `out[i] += w[r] * v[...]` adds it (no fused
// multiply-add): the same bits on every ISA (attention's weighted sum of values).
void weighted_sum(const float* w, const float* v, size_t stride, size_t count, size_t n, float* out);
void weighted_sum_with(MatmulIsa isa, const float* w, const float* v, size_t stride, size_t count, size_t n, float* out);

}  // namespace larql
