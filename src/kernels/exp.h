// e^x for f32 values, many at a time, with the same bits on every CPU and every C library:
// softmax's and SiLU's exponentials. Each value is computed in double arithmetic by one
// fixed sequence of operations (the scalar version spells it out, the SIMD ones run it on
// lanes) and rounded to f32 once:
//   x clamped to [-150, 100] (the f32 results there are already 0 and inf);
//   k = x · (1/ln 2) rounded to the nearest integer (ties to even);
//   r = x − k · ln2_hi − k · ln2_lo, two fused multiply-adds;
//   p = Σ_{i ≤ 13} r^i / i!, Horner's rule by fused multiply-add from i = 13;
//   e^x = p · 2^k, exact, then rounded to f32; a NaN stays NaN.
// The double result is within about 2^-50 of e^x, so the f32 one is e^x correctly rounded
// except where e^x lies that close to a midpoint between two floats (bench/exp_check
// counts them exhaustively). glibc's expf, which this replaces, allows 0.502 ulp and picks
// its code by CPU, so two machines could differ.
#pragma once

#include <cstddef>

#include "kernels/matvec.h"

namespace larql {

// x[i] = e^x[i] for i < n.
void exp_in_place(float* x, size_t n);

// The same with a given implementation (tests compare them).
void exp_in_place_with(MatmulIsa isa, float* x, size_t n);

// x[i] = e^(x[i] − shift), the difference rounded to f32 first (as a separate pass of
// x[i] −= shift would round it): softmax's exponentials of each score less the row's
// largest, in one pass over the row.
void exp_shifted_in_place(float* x, size_t n, float shift);
void exp_shifted_in_place_with(MatmulIsa isa, float* x, size_t n, float shift);

// One value, by the scalar version.
float exp_f32(float x);

}  // namespace larql
