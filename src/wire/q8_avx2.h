// AVX2 + F16C pieces of the q8 encoder (PROTOCOL §11) shared by the AVX2 and AVX-512
// kernel files: the exact per-lane quantiser, its fast twin, the scales of eight blocks
// computed together, and whole blocks with the oracle's arithmetic (for the blocks after
// the last group of eight and for groups with a quotient near a tie). Include only from
// files whose functions carry these targets.
#pragma once
#if defined(__x86_64__)

#include <immintrin.h>

#include <bit>
#include <cstdint>
#include <cstring>

#include "wire/q8_block.h"

#define LARQL_Q8_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace larql::wire {

// q8_quantize for eight lanes with the scalar oracle's arithmetic: an exact f32 division,
// then round half away from zero as trunc(v) ± 1 where |v - trunc(v)| ≥ 0.5 (that
// difference is exact in f32), then the ±127 clamp.
LARQL_Q8_AVX2 inline __m256i q8_quantize8(__m256 x, __m256 d) {
  const __m256 v = _mm256_div_ps(x, d);
  const __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m256 sign = _mm256_and_ps(v, _mm256_set1_ps(-0.0f));
  const __m256 frac_abs = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), _mm256_sub_ps(v, t));
  const __m256 step = _mm256_and_ps(_mm256_cmp_ps(frac_abs, _mm256_set1_ps(0.5f), _CMP_GE_OQ),
                                    _mm256_or_ps(sign, _mm256_set1_ps(1.0f)));
  const __m256 q = _mm256_min_ps(_mm256_max_ps(_mm256_add_ps(t, step), _mm256_set1_ps(-127.0f)), _mm256_set1_ps(127.0f));
  return _mm256_cvtps_epi32(q);
}

// The fast twin of q8_quantize8: a multiply by RN(1/d) instead of the division. That
// product is within 3 × 2^-24 relative of x / d, so it rounds to the same integer unless
// the quotient (|quotient| < 191) is within ~2^-16 of a .5 boundary. `max_off` collects
// |v - round(v)|: a caller that sees it reach kQ8NearTie quantises those blocks again
// exactly. The result is clamped below at -127; the caller's saturating packs clamp
// above at 127. A lane with inv_d = 0 (a zero scale) gives q = 0 and max_off 0.
inline constexpr float kQ8NearTie = 0.5f - 0x1p-14f;
LARQL_Q8_AVX2 inline __m256i q8_quantize8_fast(__m256 x, __m256 inv_d, __m256* max_off) {
  const __m256 v = _mm256_mul_ps(x, inv_d);
  const __m256 q = _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);  // exact ties are near
  *max_off = _mm256_max_ps(*max_off, _mm256_andnot_ps(_mm256_set1_ps(-0.0f), _mm256_sub_ps(v, q)));
  return _mm256_cvtps_epi32(_mm256_max_ps(q, _mm256_set1_ps(-127.0f)));
}

struct Q8Scales8 {
  alignas(16) uint16_t h[8];  // the f16 scales as sent
  __m256 inv_d;               // RN(1 / float(d)) per block, 0 where d = 0
};

// Per 128-bit half: [max(x0,x1), max(x2,x3), max(y0,y1), max(y2,y3)].
LARQL_Q8_AVX2 inline __m256i q8_pair_max(__m256i x, __m256i y) {
  const __m256 fx = _mm256_castsi256_ps(x), fy = _mm256_castsi256_ps(y);
  return _mm256_max_epi32(_mm256_castps_si256(_mm256_shuffle_ps(fx, fy, 0x88)),
                          _mm256_castps_si256(_mm256_shuffle_ps(fx, fy, 0xdd)));
}

// Largest lane of each of eight vectors of non-negative IEEE bits: out[i] = max(a[i]).
LARQL_Q8_AVX2 inline __m256i max_of_each(const __m256i a[8]) {
  const __m256i lo = q8_pair_max(q8_pair_max(a[0], a[1]), q8_pair_max(a[2], a[3]));  // per half: a0 a1 a2 a3
  const __m256i hi = q8_pair_max(q8_pair_max(a[4], a[5]), q8_pair_max(a[6], a[7]));  // per half: a4 a5 a6 a7
  return _mm256_max_epi32(_mm256_permute2x128_si256(lo, hi, 0x20), _mm256_permute2x128_si256(lo, hi, 0x31));
}

// |x| as IEEE bits, lane by lane, for the 32 values of one block: the max of its 4 vectors.
LARQL_Q8_AVX2 inline __m256i q8_block_abs_max8(const float* x) {
  const __m256i abs_bits = _mm256_set1_epi32(0x7fffffff);
  __m256i m = _mm256_setzero_si256();
  for (int k = 0; k < 4; ++k)
    m = _mm256_max_epi32(m, _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 8 * k)), abs_bits));
  return m;
}

// The scales of the eight blocks at `in` (256 values): d = f16(max|x| / 127) as
// q8_scale_for_max computes it. False if a value is non-finite or a scale is beyond f16.
LARQL_Q8_AVX2 inline bool q8_scales8(const float* in, Q8Scales8* out) {
  __m256i block_max[8];
  for (int b = 0; b < 8; ++b) block_max[b] = q8_block_abs_max8(in + 32 * b);
  const __m256i m = max_of_each(block_max);
  const __m256i non_finite = _mm256_cmpgt_epi32(m, _mm256_set1_epi32(0x7f7fffff));
  if (!_mm256_testz_si256(non_finite, non_finite)) return false;
  const __m128i h = _mm256_cvtps_ph(_mm256_div_ps(_mm256_castsi256_ps(m), _mm256_set1_ps(127.0f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m128i exp = _mm_and_si128(h, _mm_set1_epi16(0x7c00));
  const __m128i inf = _mm_cmpeq_epi16(exp, _mm_set1_epi16(0x7c00));
  if (!_mm_testz_si128(inf, inf)) return false;
  _mm_store_si128(reinterpret_cast<__m128i*>(out->h), h);
  const __m256 d = _mm256_cvtph_ps(h);
  const __m256 zero = _mm256_cmp_ps(d, _mm256_setzero_ps(), _CMP_EQ_OQ);
  out->inv_d = _mm256_andnot_ps(zero, _mm256_div_ps(_mm256_set1_ps(1.0f), d));
  return true;
}

// Packs four vectors of q (already ≥ -127) into 32 bytes; the saturating packs clamp at 127.
LARQL_Q8_AVX2 inline void q8_store_block(__m256i q0, __m256i q1, __m256i q2, __m256i q3, uint8_t* dst) {
  const __m256i packed = _mm256_packs_epi16(_mm256_packs_epi32(q0, q1), _mm256_packs_epi32(q2, q3));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), _mm256_permutevar8x32_epi32(packed, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
}

// The 32 q of one block whose scale `h` is known, with the oracle's division.
LARQL_Q8_AVX2 inline void q8_quantize_block_exact(const float* x, uint16_t h, uint8_t* q) {
  const float d = _cvtsh_ss(h);
  if (d == 0.0f) {
    std::memset(q, 0, kQ8BlockValues);
    return;
  }
  const __m256 vd = _mm256_set1_ps(d);
  q8_store_block(q8_quantize8(_mm256_loadu_ps(x), vd), q8_quantize8(_mm256_loadu_ps(x + 8), vd),
                 q8_quantize8(_mm256_loadu_ps(x + 16), vd), q8_quantize8(_mm256_loadu_ps(x + 24), vd), q);
}

// One whole block, scale and values, with the oracle's arithmetic. False as encode_q8.
LARQL_Q8_AVX2 inline bool q8_encode_block_exact(const float* x, uint8_t* block) {
  const __m256i m = q8_block_abs_max8(x);
  __m128i m4 = _mm_max_epi32(_mm256_castsi256_si128(m), _mm256_extracti128_si256(m, 1));
  m4 = _mm_max_epi32(m4, _mm_shuffle_epi32(m4, 0x4e));
  m4 = _mm_max_epi32(m4, _mm_shuffle_epi32(m4, 0xb1));
  const uint32_t max_bits = static_cast<uint32_t>(_mm_cvtsi128_si32(m4));
  if (max_bits >= 0x7f800000u) return false;  // NaN or inf in the block
  const uint16_t h = q8_scale_for_max(std::bit_cast<float>(max_bits));
  if (!f16_is_finite(h)) return false;
  std::memcpy(block, &h, 2);
  q8_quantize_block_exact(x, h, block + 2);
  return true;
}

}  // namespace larql::wire

#endif
