#include "kernels/dot.h"

#include <cmath>
#include <cstring>

#include "kernels/matvec_tiles.h"

namespace larql {
namespace {

float dot_scalar(const float* a, const float* b, size_t n) {
  float lanes[16] = {};
  for (size_t k = 0; k < n; ++k) lanes[k % 16] = std::fma(a[k], b[k], lanes[k % 16]);
  for (size_t k = n; k < (n + 15) / 16 * 16; ++k) lanes[k % 16] = std::fma(0.0f, 0.0f, lanes[k % 16]);  // as SIMD tails do
  return reduce16(lanes);
}

void weighted_sum_scalar(const float* w, const float* v, size_t stride, size_t count, size_t n, float* out) {
  std::memset(out, 0, n * sizeof(float));
  for (size_t r = 0; r < count; ++r)
    for (size_t i = 0; i < n; ++i) out[i] += w[r] * v[r * stride + i];
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

LARQL_AVX512_TARGET("avx512f") float dot_avx512(const float* a, const float* b, size_t n) {
  __m512 acc = _mm512_setzero_ps();
  size_t k = 0;
  for (; k + 16 <= n; k += 16) acc = _mm512_fmadd_ps(_mm512_loadu_ps(a + k), _mm512_loadu_ps(b + k), acc);
  if (k < n) {
    const __mmask16 present = __mmask16((1u << (n - k)) - 1);
    acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(present, a + k), _mm512_maskz_loadu_ps(present, b + k), acc);
  }
  return reduce16(acc);
}

// Four keys at a time: four independent chains where one dot() has one.
LARQL_AVX512_TARGET("avx512f") void dots_avx512(const float* q, const float* keys, size_t stride, size_t count, size_t n, float* out) {
  size_t r = 0;
  if (n % 16 == 0)
    for (; r + 4 <= count; r += 4) {
      const float* k = keys + r * stride;
      __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
      for (size_t i = 0; i < n; i += 16) {
        const __m512 qv = _mm512_loadu_ps(q + i);
        a0 = _mm512_fmadd_ps(qv, _mm512_loadu_ps(k + i), a0);
        a1 = _mm512_fmadd_ps(qv, _mm512_loadu_ps(k + stride + i), a1);
        a2 = _mm512_fmadd_ps(qv, _mm512_loadu_ps(k + 2 * stride + i), a2);
        a3 = _mm512_fmadd_ps(qv, _mm512_loadu_ps(k + 3 * stride + i), a3);
      }
      out[r] = reduce16(a0), out[r + 1] = reduce16(a1), out[r + 2] = reduce16(a2), out[r + 3] = reduce16(a3);
    }
  for (; r < count; ++r) out[r] = dot_avx512(q, keys + r * stride, n);
}

// Sixty-four outputs stay in registers while the rows go by.
LARQL_AVX512_TARGET("avx512f") void weighted_sum_avx512(const float* w, const float* v, size_t stride, size_t count, size_t n,
                                                            float* out) {
  size_t i = 0;
  for (; i + 64 <= n; i += 64) {
    __m512 o0 = _mm512_setzero_ps(), o1 = o0, o2 = o0, o3 = o0;
    for (size_t r = 0; r < count; ++r) {
      const __m512 wr = _mm512_set1_ps(w[r]);
      const float* vr = v + r * stride + i;
      o0 = _mm512_add_ps(o0, _mm512_mul_ps(wr, _mm512_loadu_ps(vr)));
      o1 = _mm512_add_ps(o1, _mm512_mul_ps(wr, _mm512_loadu_ps(vr + 16)));
      o2 = _mm512_add_ps(o2, _mm512_mul_ps(wr, _mm512_loadu_ps(vr + 32)));
      o3 = _mm512_add_ps(o3, _mm512_mul_ps(wr, _mm512_loadu_ps(vr + 48)));
    }
    _mm512_storeu_ps(out + i, o0), _mm512_storeu_ps(out + i + 16, o1);
    _mm512_storeu_ps(out + i + 32, o2), _mm512_storeu_ps(out + i + 48, o3);
  }
  for (; i < n; i += 16) {
    const __mmask16 present = n - i >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - i)) - 1);
    __m512 o = _mm512_setzero_ps();
    for (size_t r = 0; r < count; ++r)
      o = _mm512_add_ps(o, _mm512_mul_ps(_mm512_set1_ps(w[r]), _mm512_maskz_loadu_ps(present, v + r * stride + i)));
    _mm512_mask_storeu_ps(out + i, present, o);
  }
}

__attribute__((target("avx2"))) void weighted_sum_avx2(const float* w, const float* v, size_t stride, size_t count, size_t n,
                                                       float* out) {
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    __m256 o0 = _mm256_setzero_ps(), o1 = o0, o2 = o0, o3 = o0;
    for (size_t r = 0; r < count; ++r) {
      const __m256 wr = _mm256_set1_ps(w[r]);
      const float* vr = v + r * stride + i;
      o0 = _mm256_add_ps(o0, _mm256_mul_ps(wr, _mm256_loadu_ps(vr)));
      o1 = _mm256_add_ps(o1, _mm256_mul_ps(wr, _mm256_loadu_ps(vr + 8)));
      o2 = _mm256_add_ps(o2, _mm256_mul_ps(wr, _mm256_loadu_ps(vr + 16)));
      o3 = _mm256_add_ps(o3, _mm256_mul_ps(wr, _mm256_loadu_ps(vr + 24)));
    }
    _mm256_storeu_ps(out + i, o0), _mm256_storeu_ps(out + i + 8, o1);
    _mm256_storeu_ps(out + i + 16, o2), _mm256_storeu_ps(out + i + 24, o3);
  }
  if (i < n) {  // the rest one float at a time, as the scalar version sums it
    std::memset(out + i, 0, (n - i) * sizeof(float));
    for (size_t r = 0; r < count; ++r)
      for (size_t k = i; k < n; ++k) out[k] += w[r] * v[r * stride + k];
  }
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

void dots_with(MatmulIsa isa, const float* q, const float* keys, size_t stride, size_t count, size_t n, float* out) {
#if defined(__x86_64__)
  if (isa >= MatmulIsa::avx512) return dots_avx512(q, keys, stride, count, n, out);
#endif
  for (size_t r = 0; r < count; ++r) out[r] = dot_with(isa, q, keys + r * stride, n);
}

void dots(const float* q, const float* keys, size_t stride, size_t count, size_t n, float* out) {
  static const MatmulIsa isa = best_matmul_isa();
  dots_with(isa, q, keys, stride, count, n, out);
}

void weighted_sum_with(MatmulIsa isa, const float* w, const float* v, size_t stride, size_t count, size_t n, float* out) {
  switch (isa) {
    case MatmulIsa::scalar: return weighted_sum_scalar(w, v, stride, count, n, out);
#if defined(__x86_64__)
    case MatmulIsa::avx2: return weighted_sum_avx2(w, v, stride, count, n, out);
    case MatmulIsa::avx512:
    case MatmulIsa::avx512bf16: return weighted_sum_avx512(w, v, stride, count, n, out);
#else
    default: return weighted_sum_scalar(w, v, stride, count, n, out);
#endif
  }
}

void weighted_sum(const float* w, const float* v, size_t stride, size_t count, size_t n, float* out) {
  static const MatmulIsa isa = best_matmul_isa();
  weighted_sum_with(isa, w, v, stride, count, n, out);
}

}  // namespace larql
