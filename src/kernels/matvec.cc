#include "kernels/matvec.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "wire/cpu_features.h"

namespace larql {
namespace {

template <DType T>
float dot_scalar(const void* row, const float* x, size_t n) {
  float sum = 0;
  for (size_t i = 0; i < n; ++i) sum += load_as_f32(T, row, i) * x[i];
  return sum;
}

#if defined(__x86_64__)
#define LARQL_AVX2 __attribute__((target("avx2,fma,f16c")))

LARQL_AVX2 inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
LARQL_AVX2 inline __m256 load8(const uint16_t* p, std::integral_constant<DType, DType::bf16>) {
  __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(raw), 16));
}
LARQL_AVX2 inline __m256 load8(const uint16_t* p, std::integral_constant<DType, DType::f16>) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

template <DType T>
LARQL_AVX2 inline __m256 load_w(const void* row, size_t i) {
  if constexpr (T == DType::f32)
    return load8(static_cast<const float*>(row) + i);
  else
    return load8(static_cast<const uint16_t*>(row) + i, std::integral_constant<DType, T>{});
}

// Four independent accumulators of eight lanes, then a fixed reduction order.
template <DType T>
LARQL_AVX2 float dot_avx2(const void* row, const float* x, size_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    a0 = _mm256_fmadd_ps(load_w<T>(row, i), _mm256_loadu_ps(x + i), a0);
    a1 = _mm256_fmadd_ps(load_w<T>(row, i + 8), _mm256_loadu_ps(x + i + 8), a1);
    a2 = _mm256_fmadd_ps(load_w<T>(row, i + 16), _mm256_loadu_ps(x + i + 16), a2);
    a3 = _mm256_fmadd_ps(load_w<T>(row, i + 24), _mm256_loadu_ps(x + i + 24), a3);
  }
  for (; i + 8 <= n; i += 8) a0 = _mm256_fmadd_ps(load_w<T>(row, i), _mm256_loadu_ps(x + i), a0);
  const __m256 s = _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3));
  __m128 h = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
  h = _mm_add_ps(h, _mm_movehl_ps(h, h));
  h = _mm_add_ss(h, _mm_movehdup_ps(h));
  float sum = _mm_cvtss_f32(h);
  for (; i < n; ++i) sum += load_as_f32(T, row, i) * x[i];
  return sum;
}
#endif

}  // namespace

DotFn scalar_dot_kernel(DType t) {
  switch (t) {
    case DType::f32: return dot_scalar<DType::f32>;
    case DType::f16: return dot_scalar<DType::f16>;
    case DType::bf16: return dot_scalar<DType::bf16>;
  }
  return dot_scalar<DType::f32>;
}

DotFn dot_kernel(DType t) {
#if defined(__x86_64__)
  static const bool avx2 = cpu_has_avx2_fma_f16c();
  if (avx2) {
    switch (t) {
      case DType::f32: return dot_avx2<DType::f32>;
      case DType::f16: return dot_avx2<DType::f16>;
      case DType::bf16: return dot_avx2<DType::bf16>;
    }
  }
#endif
  return scalar_dot_kernel(t);
}

void matvec(const Matrix& w, const float* x, float* y, ThreadPool& pool) {
  const DotFn dot = dot_kernel(w.dtype);
  auto rows = [&](size_t begin, size_t end) {
    for (size_t r = begin; r < end; ++r) y[r] = dot(w.row_ptr(r), x, w.cols);
  };
  // Small matrices are not worth waking workers for.
  if (w.rows * w.cols < (1u << 15))
    rows(0, w.rows);
  else
    pool.parallel_for(w.rows, rows, 16);
}

void matmul(const Matrix& w, const float* x, size_t n, float* y, ThreadPool& pool) {
  const DotFn dot = dot_kernel(w.dtype);
  // Row-outer: each weight row is read from memory once and reused from cache for all n inputs.
  auto rows = [&](size_t begin, size_t end) {
    for (size_t r = begin; r < end; ++r) {
      const uint8_t* row = w.row_ptr(r);
      for (size_t t = 0; t < n; ++t) y[t * w.rows + r] = dot(row, x + t * w.cols, w.cols);
    }
  };
  if (w.rows * w.cols * n < (1u << 15))
    rows(0, w.rows);
  else
    pool.parallel_for(w.rows, rows, 16);
}

}  // namespace larql
