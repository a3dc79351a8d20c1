// AVX-512 (F + BW) i8 quantiser: the same arithmetic as the AVX2 one (see quantize_one
// there), sixteen lanes at a time, with mask registers for the correction step. The i8
// encoder is compute-bound where every other kernel is memory-bound at AVX2 width, so it
// is the only kernel with a wider version.
#if defined(__x86_64__)

#include <immintrin.h>

#include <bit>
#include <cmath>

#include "wire/i8_block.h"
#include "wire/kernels_avx512.h"

#define LARQL_AVX512 __attribute__((target("avx512f,avx512bw")))

namespace larql::wire {
namespace {

// Largest |x| as IEEE bits; ≥ 0x7f800000 means a NaN or inf was present.
LARQL_AVX512 uint32_t max_abs_bits(const float* in, size_t n) {
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff);
  __m512i m0 = _mm512_setzero_si512(), m1 = _mm512_setzero_si512();
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    m0 = _mm512_max_epi32(m0, _mm512_and_si512(_mm512_loadu_si512(in + i), abs_mask));
    m1 = _mm512_max_epi32(m1, _mm512_and_si512(_mm512_loadu_si512(in + i + 16), abs_mask));
  }
  if (i < n) {
    const __mmask16 first = n - i >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - i)) - 1);
    m0 = _mm512_max_epi32(m0, _mm512_and_si512(_mm512_castps_si512(_mm512_maskz_loadu_ps(first, in + i)), abs_mask));
    if (n - i > 16) {
      const __mmask16 second = __mmask16((1u << (n - i - 16)) - 1);
      m1 = _mm512_max_epi32(m1, _mm512_and_si512(_mm512_castps_si512(_mm512_maskz_loadu_ps(second, in + i + 16)), abs_mask));
    }
  }
  return static_cast<uint32_t>(_mm512_reduce_max_epi32(_mm512_max_epi32(m0, m1)));
}

struct Quantiser {
  __m512 inv, scale, half, neg_half;
  __m512i sign_bit = _mm512_set1_epi32(static_cast<int>(0x80000000u));
  __m512i abs_bits = _mm512_set1_epi32(0x7fffffff);
  __m512i one_bits = _mm512_set1_epi32(0x3f800000);

  // q0 = round(x × inv); `near` flags the lanes whose residual reaches half a step, the
  // only ones the correction of quantize_one (kernels_avx2.cc) can change. For most data
  // no lane of a 64-value block is flagged and the correction is skipped.
  LARQL_AVX512 __m512 round(__m512 v, __mmask16* near) const {
    const __m512 q = _mm512_roundscale_ps(_mm512_mul_ps(v, inv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512i r_abs = _mm512_and_si512(_mm512_castps_si512(_mm512_fnmadd_ps(q, scale, v)), abs_bits);
    *near = _mm512_cmp_ps_mask(_mm512_castsi512_ps(r_abs), half, _CMP_GE_OQ);
    return q;
  }

  // The full correction of quantize_one for sixteen lanes.
  LARQL_AVX512 __m512 correct(__m512 v, __m512 q) const {
    const __m512i x_sign = _mm512_and_si512(_mm512_castps_si512(v), sign_bit);
    const __m512 r_away =
        _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(_mm512_fnmadd_ps(q, scale, v)), x_sign));
    const __m512 step = _mm512_castsi512_ps(_mm512_or_si512(x_sign, one_bits));
    q = _mm512_mask_add_ps(q, _mm512_cmp_ps_mask(r_away, half, _CMP_GE_OQ), q, step);
    return _mm512_mask_sub_ps(q, _mm512_cmp_ps_mask(r_away, neg_half, _CMP_LT_OQ), q, step);
  }

  // 64 values to 64 saturated bytes (no clamp needed: |x × inv| ≤ 127 (1 + 2^-22)).
  // Saturating packs plus one dword permute are much cheaper on Zen 4 than vpmovsdb.
  LARQL_AVX512 void block64(const float* x, int8_t* out) const {
    const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    __m512 v[4], q[4];
    __mmask16 near[4];
    for (int j = 0; j < 4; ++j) {
      v[j] = _mm512_loadu_ps(x + 16 * j);
      q[j] = round(v[j], &near[j]);
    }
    if (_kor_mask16(_kor_mask16(near[0], near[1]), _kor_mask16(near[2], near[3])))
      for (int j = 0; j < 4; ++j) q[j] = correct(v[j], q[j]);
    const __m512i ab = _mm512_packs_epi32(_mm512_cvtps_epi32(q[0]), _mm512_cvtps_epi32(q[1]));
    const __m512i cd = _mm512_packs_epi32(_mm512_cvtps_epi32(q[2]), _mm512_cvtps_epi32(q[3]));
    _mm512_storeu_si512(out, _mm512_permutexvar_epi32(order, _mm512_packs_epi16(ab, cd)));
  }
};

}  // namespace

LARQL_AVX512 bool encode_i8_row_avx512(const float* in, size_t n, uint8_t* block, float (*quantize_tail)(float, float, float)) {
  const uint32_t max_bits = max_abs_bits(in, n);
  if (max_bits >= 0x7f800000u) return false;
  const float max = std::bit_cast<float>(max_bits);
  const float scale = i8_scale_for_max(max);
  if (!i8_scale_is_valid(scale)) return false;
  write_i8_block_header(block, scale);
  int8_t* q = reinterpret_cast<int8_t*>(block + kI8BlockHeaderBytes);
  const float inv = 127.0f / max;
  if (max == 0.0f || !std::isfinite(inv)) {  // zeros, or a subnormal maximum: the scalar oracle's path
    for (size_t i = 0; i < n; ++i) q[i] = clamp_i8(std::round(in[i] / scale));
    return true;
  }
  const Quantiser quantise{_mm512_set1_ps(inv), _mm512_set1_ps(scale), _mm512_set1_ps(0.5f * scale),
                           _mm512_set1_ps(-0.5f * scale)};
  size_t i = 0;
  for (; i + 64 <= n; i += 64) quantise.block64(in + i, q + i);
  for (; i < n; ++i) q[i] = static_cast<int8_t>(quantize_tail(in[i], inv, scale));
  return true;
}

}  // namespace larql::wire

#endif
