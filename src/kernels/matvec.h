// Matrix-vector and matrix-matrix products over weights in their stored format, for decode
// (one token) and prefill (many). The GGML block formats follow block_dot.h's contract
// (activations quantised to 8 bits, integer dot products); bf16 weights whose Matrix asks
// for the bf16-dot arithmetic follow bf16_dot.h's; f32, f16 and bf16 otherwise this one:
//
// Every output element is one dot product with a fixed arithmetic: sixteen lanes of FMA
// accumulation over k (element k goes to lane k mod 16, the tail padded with zeros), then
// a fixed tree over the lanes. The scalar, AVX2 and AVX-512 versions all follow it, so the
// result of y[t][r] depends on nothing else: not the ISA, not the thread count, not
// whether it came from a matvec or from which tile of a matmul. That is what makes a
// remote f32 run bit-identical to a local one, and a chunked prefill equal to a whole one.
#pragma once

#include <cstddef>
#include <span>

#include "kernels/dtype.h"
#include "kernels/thread_pool.h"

namespace larql {

// avx512bf16 differs from avx512 only for the bf16-dot arithmetic, which it runs with the
// CPU's own vdpbf16ps instead of an emulation.
enum class MatmulIsa { scalar, avx2, avx512, avx512bf16 };

// The widest implementation this CPU runs (all give identical results).
MatmulIsa best_matmul_isa();

// y[t][r] = W[r] · x[t] for t < n: x is [n][w.cols], y is [n][w.rows].
void matmul(const Matrix& w, const float* x, size_t n, float* y, ThreadPool& pool);
void matmul_with(MatmulIsa isa, const Matrix& w, const float* x, size_t n, float* y, ThreadPool& pool);

// A product of a shared input: its matrix and where its outputs go ([n][w->rows]).
struct Product {
  const Matrix* w;
  float* y;
};

// matmul of one input x ([n][cols]) by matrices of that width: attention's q, k and v, the
// FFN's gate and up. The input is put in the forms the tiles read once, and the products'
// pieces are one job, so a thread that finishes its share of one goes on to the next
// instead of waiting for the other. The same bits as one matmul per product.
void matmul_shared_input(std::span<const Product> products, const float* x, size_t n, ThreadPool& pool);
void matmul_shared_input_with(MatmulIsa isa, std::span<const Product> products, const float* x, size_t n, ThreadPool& pool);

// Products each of its own input: y = W · x for x's n rows ([n][w->cols] into [n][w->rows]).
struct InputProduct {
  const Matrix* w;
  const float* x;
  size_t n;
  float* y;
};

// Several products, each of its own input (a mixture-of-experts layer's experts, each over
// the positions routed to it), as one job: threads split the work over (product, rows)
// pieces, so that two threads stay busy whatever the products' sizes. Inputs given twice
// (the same x and n) are prepared once. The same bits as one matmul per product.
void matmul_each(std::span<const InputProduct> products, ThreadPool& pool);
void matmul_each_with(MatmulIsa isa, std::span<const InputProduct> products, ThreadPool& pool);

// y[r] = W[r] · x: matmul with n = 1.
inline void matvec(const Matrix& w, const float* x, float* y, ThreadPool& pool) { matmul(w, x, 1, y, pool); }

}  // namespace larql
