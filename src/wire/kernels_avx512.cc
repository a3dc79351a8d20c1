// AVX-512 (F + BW) kernels where the wider registers pay: the i8 quantiser (the AVX2
// arithmetic of quantize_one, sixteen lanes at a time, with mask registers for the
// correction step), the q8 quantiser and the q8 decoder. The quantisers are compute-bound
// where f32/f16 conversion is memory-bound at AVX2 width already.
#if defined(__x86_64__)

#include "base/simd_avx512.h"

#include <bit>
#include <cmath>
#include <cstring>

#include "wire/i8_block.h"
#include "wire/kernels_avx512.h"
#include "wire/q8_avx2.h"
#include "wire/q8_block.h"

#define LARQL_AVX512 LARQL_AVX512_TARGET("avx512f,avx512bw")
#define LARQL_AVX512_Q8 LARQL_AVX512_TARGET("avx512f,avx512bw,avx2,fma,f16c")

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

// The q8 encoder: eight blocks' scales at once with the shared AVX2 code, then each
// block's 32 values as two 16-lane halves with the fast multiply of q8_quantize8_fast,
// narrowed with signed saturation (the upper clamp at 127); the blocks after the last
// group of eight, and groups with a quotient near a tie, with the oracle's arithmetic.
LARQL_AVX512_Q8 bool encode_q8_avx512(const float* in, size_t n, uint8_t* blocks) {
  const size_t count = n / kQ8BlockValues;
  size_t b = 0;
  for (; b + 8 <= count; b += 8) {
    Q8Scales8 scales;
    if (!q8_scales8(in + b * kQ8BlockValues, &scales)) return false;
    alignas(32) float inv[8];
    _mm256_store_ps(inv, scales.inv_d);
    __m512 max_off = _mm512_setzero_ps();
    for (size_t i = 0; i < 8; ++i) {
      const float* x = in + (b + i) * kQ8BlockValues;
      uint8_t* dst = blocks + (b + i) * kQ8BlockBytes;
      std::memcpy(dst, &scales.h[i], 2);
      const __m512 inv_d = _mm512_set1_ps(inv[i]);
      for (size_t half = 0; half < 2; ++half) {
        const __m512 v = _mm512_mul_ps(_mm512_loadu_ps(x + 16 * half), inv_d);
        const __m512 q = _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        max_off = _mm512_max_ps(max_off, _mm512_abs_ps(_mm512_sub_ps(v, q)));
        const __m512i qi = _mm512_cvtps_epi32(_mm512_max_ps(q, _mm512_set1_ps(-127.0f)));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 2 + 16 * half), _mm512_cvtsepi32_epi8(qi));
      }
    }
    if (_mm512_cmp_ps_mask(max_off, _mm512_set1_ps(kQ8NearTie), _CMP_GE_OQ))  // rare: some quotient within 2^-14 of a .5
      for (size_t i = 0; i < 8; ++i)
        q8_quantize_block_exact(in + (b + i) * kQ8BlockValues, scales.h[i], blocks + (b + i) * kQ8BlockBytes + 2);
  }
  for (; b < count; ++b)
    if (!q8_encode_block_exact(in + b * kQ8BlockValues, blocks + b * kQ8BlockBytes)) return false;
  return true;
}

LARQL_AVX512_Q8 bool decode_q8_avx512(const uint8_t* blocks, size_t n, float* out) {
  for (size_t b = 0; b < n / kQ8BlockValues; ++b, blocks += kQ8BlockBytes, out += kQ8BlockValues) {
    uint16_t h;
    std::memcpy(&h, blocks, 2);
    if (!q8_scale_is_valid(h)) return false;
    const __m512 d = _mm512_set1_ps(f16_to_f32(h));
    const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blocks + 2));
    const __m128i hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blocks + 18));
    _mm512_storeu_ps(out, _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(lo)), d));
    _mm512_storeu_ps(out + 16, _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(hi)), d));
  }
  return true;
}

}  // namespace larql::wire

#endif
