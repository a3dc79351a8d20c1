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

}  // namespace larql
