// Matrix-vector products over weights in their stored type (f32, f16, bf16).
//
// Every output element is one dot product computed the same way whether it comes from
// matvec (decode) or matmul (prefill), and whatever the thread count: the split is over
// output rows only. So a prefill chunked differently, or run on a server with other
// threads, gives bit-identical results — what makes remote f32 runs exact.
#pragma once

#include <cstddef>

#include "kernels/dtype.h"
#include "kernels/thread_pool.h"

namespace larql {

// dot(W[row], x) for a row of `n` values of type `t`.
using DotFn = float (*)(const void* row, const float* x, size_t n);
DotFn dot_kernel(DType t);
DotFn scalar_dot_kernel(DType t);  // the test oracle

// y[r] = W[r] · x for every row r.
void matvec(const Matrix& w, const float* x, float* y, ThreadPool& pool);

// y[t][r] = W[r] · x[t] for t < n: x is [n][w.cols], y is [n][w.rows].
void matmul(const Matrix& w, const float* x, size_t n, float* y, ThreadPool& pool);

}  // namespace larql
