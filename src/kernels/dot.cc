#include "kernels/dot.h"

#include <cmath>

#include "kernels/matvec_tiles.h"

namespace larql {
namespace {

float dot_scalar(const float* a, const float* b, size_t n) {
  float lanes[16] = {};
  for (size_t k = 0; k < n; ++k) lanes[k % 16] = std::fma(a[k], b[k], lanes[k % 16]);
  for (size_t k = n; k < (n + 15) / 16 * 16; ++k) lanes[k % 16] = std::fma(0.0f, 0.0f, lanes[k % 16]);  // as SIMD tails do
  return reduce16(lanes);
}

#if defined(__x86_64__)
__attribute__((target("avx2,fma"))) float dot_avx2(const float* a, const float* b, size_t n) {
  __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
  size_t k = 0;
  for (; k + 16 <= n; k += 16) {
    lo = _mm256_fmadd_ps(_mm256_loadu_ps(a + k), _mm256_loadu_ps(b + k), lo);
    hi = _mm256_fmadd_ps(_mm256_loadu_ps(a + k + 8), _mm256_loadu_ps(b + k + 8), hi);
  }
  if (k < n) {
    alignas(32) float pa[16] = {}, pb[16] = {};
    for (size_t i = k; i < n; ++i) pa[i - k] = a[i], pb[i - k] = b[i];
    lo = _mm256_fmadd_ps(_mm256_load_ps(pa), _mm256_load_ps(pb), lo);
    hi = _mm256_fmadd_ps(_mm256_load_ps(pa + 8), _mm256_load_ps(pb + 8), hi);
  }
  return reduce16(lo, hi);
}

__attribute__((target("avx512f"))) float dot_avx512(const float* a, const float* b, size_t n) {
  __m512 acc = _mm512_setzero_ps();
  size_t k = 0;
  for (; k + 16 <= n; k += 16) acc = _mm512_fmadd_ps(_mm512_loadu_ps(a + k), _mm512_loadu_ps(b + k), acc);
  if (k < n) {
    const __mmask16 present = __mmask16((1u << (n - k)) - 1);
    acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(present, a + k), _mm512_maskz_loadu_ps(present, b + k), acc);
  }
  return reduce16(acc);
}
#endif

}  // namespace

float dot_with(MatmulIsa isa, const float* a, const float* b, size_t n) {
  switch (isa) {
    case MatmulIsa::scalar: return dot_scalar(a, b, n);
#if defined(__x86_64__)
    case MatmulIsa::avx2: return dot_avx2(a, b, n);
    case MatmulIsa::avx512:
    case MatmulIsa::avx512bf16: return dot_avx512(a, b, n);
#else
    default: return dot_scalar(a, b, n);
#endif
  }
  return dot_scalar(a, b, n);
}

float dot(const float* a, const float* b, size_t n) {
  static const MatmulIsa isa = best_matmul_isa();
  return dot_with(isa, a, b, n);
}

}  // namespace larql
