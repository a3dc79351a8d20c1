// AVX2 + F16C + FMA kernels. Every function carries the target attribute instead of the
// file being built with -mavx2, so nothing AVX2 leaks into inline code shared with the
// scalar build. Tails shorter than a vector use scalar code with the same arithmetic.
#if defined(__x86_64__)

#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "base/byte_io.h"
#include "base/cpu_features.h"
#include "base/f16.h"
#include "wire/i8_block.h"
#include "wire/kernels.h"
#include "wire/kernels_avx512.h"
#include "wire/q8_avx2.h"
#include "wire/q8_block.h"

#define LARQL_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace larql::wire {
namespace {

LARQL_AVX2 inline __m256i non_finite_lanes(__m256 v) {
  const __m256i exp_mask = _mm256_set1_epi32(0x7f800000);
  return _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_castps_si256(v), exp_mask), exp_mask);
}

LARQL_AVX2 inline __m128i f16_non_finite_lanes(__m128i h) {
  const __m128i exp_mask = _mm_set1_epi16(0x7c00);
  return _mm_cmpeq_epi16(_mm_and_si128(h, exp_mask), exp_mask);
}

LARQL_AVX2 bool encode_f32(const float* in, size_t n, uint8_t* out) {
  __m256i bad = _mm256_setzero_si256();
  size_t i = 0;
#pragma GCC unroll 4
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_loadu_ps(in + i);
    _mm256_storeu_ps(reinterpret_cast<float*>(out + 4 * i), v);
    bad = _mm256_or_si256(bad, non_finite_lanes(v));
  }
  bool finite = _mm256_testz_si256(bad, bad);
  for (; i < n; ++i) {
    store_f32(out + 4 * i, in[i]);
    finite &= std::isfinite(in[i]);
  }
  return finite;
}

LARQL_AVX2 bool decode_f32(const uint8_t* in, size_t n, float* out) {
  __m256i bad = _mm256_setzero_si256();
  size_t i = 0;
#pragma GCC unroll 4
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_loadu_ps(reinterpret_cast<const float*>(in + 4 * i));
    _mm256_storeu_ps(out + i, v);
    bad = _mm256_or_si256(bad, non_finite_lanes(v));
  }
  bool finite = _mm256_testz_si256(bad, bad);
  for (; i < n; ++i) {
    out[i] = load_f32(in + 4 * i);
    finite &= std::isfinite(out[i]);
  }
  return finite;
}

LARQL_AVX2 bool encode_f16(const float* in, size_t n, uint8_t* out) {
  __m128i bad = _mm_setzero_si128();
  size_t i = 0;
#pragma GCC unroll 4
  for (; i + 8 <= n; i += 8) {
    __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 2 * i), h);
    bad = _mm_or_si128(bad, f16_non_finite_lanes(h));
  }
  bool fits = _mm_testz_si128(bad, bad);
  for (; i < n; ++i) {
    uint16_t h = f32_to_f16(in[i]);
    std::memcpy(out + 2 * i, &h, 2);
    fits &= f16_is_finite(h);
  }
  return fits;
}

LARQL_AVX2 bool decode_f16(const uint8_t* in, size_t n, float* out) {
  __m128i bad = _mm_setzero_si128();
  size_t i = 0;
#pragma GCC unroll 4
  for (; i + 8 <= n; i += 8) {
    __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + 2 * i));
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
    bad = _mm_or_si128(bad, f16_non_finite_lanes(h));
  }
  bool finite = _mm_testz_si128(bad, bad);
  for (; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, in + 2 * i, 2);
    out[i] = f16_to_f32(h);
    finite &= f16_is_finite(h);
  }
  return finite;
}

// Largest |x| as IEEE bits (non-negative floats order like their bit patterns, and NaN/inf
// compare above every finite value, so one integer max also detects non-finite input).
LARQL_AVX2 uint32_t max_abs_bits(const float* in, size_t n) {
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff);
  __m256i m = _mm256_setzero_si256();
  size_t i = 0;
#pragma GCC unroll 4
  for (; i + 8 <= n; i += 8)
    m = _mm256_max_epi32(m, _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i)), abs_mask));
  __m128i h = _mm_max_epi32(_mm256_castsi256_si128(m), _mm256_extracti128_si256(m, 1));
  h = _mm_max_epi32(h, _mm_shuffle_epi32(h, 0x4e));
  h = _mm_max_epi32(h, _mm_shuffle_epi32(h, 0xb1));
  uint32_t best = static_cast<uint32_t>(_mm_cvtsi128_si32(h));
  for (; i < n; ++i) {
    uint32_t bits = std::bit_cast<uint32_t>(in[i]) & 0x7fffffffu;
    best = bits > best ? bits : best;
  }
  return best;
}

// Quantising with a reciprocal multiply (PROTOCOL §5 allows it) and then correcting
// exactly: q0 = round(x × inv) is at most one step from the nearest level, and the
// residual r = x - q0·scale (one rounding, via FMA) says which way to step. Measured
// away from zero (r·sign(x)), r ≥ scale/2 steps outward and r < -scale/2 steps inward,
// so exact ties go away from zero, as round(x / scale) in the reference does.
LARQL_AVX2 float quantize_one(float x, float inv, float scale) {
  float q = std::nearbyint(x * inv);
  const float s = std::copysign(1.0f, x);
  const float r_away = std::fma(-q, scale, x) * s;
  if (r_away >= 0.5f * scale) q += s;
  else if (r_away < -0.5f * scale) q -= s;
  return q;
}

// quantize_one for eight lanes, in two parts: round_q gives q0 and flags the lanes whose
// residual reaches half a step (the only ones the correction can change); correct_q is the
// correction. For most data no lane of a 32-value block is flagged and correct_q is
// skipped. No clamp is needed: |x × inv| ≤ 127 (1 + 2^-22).
LARQL_AVX2 inline __m256 round_q(__m256 v, __m256 inv, __m256 scale, __m256 half, __m256* near) {
  const __m256 q = _mm256_round_ps(_mm256_mul_ps(v, inv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m256 r_abs = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), _mm256_fnmadd_ps(q, scale, v));
  *near = _mm256_cmp_ps(r_abs, half, _CMP_GE_OQ);
  return q;
}

LARQL_AVX2 inline __m256 correct_q(__m256 v, __m256 q, __m256 scale, __m256 half, __m256 neg_half) {
  const __m256 x_sign = _mm256_and_ps(v, _mm256_set1_ps(-0.0f));
  const __m256 r_away = _mm256_xor_ps(_mm256_fnmadd_ps(q, scale, v), x_sign);
  const __m256 step = _mm256_or_ps(x_sign, _mm256_set1_ps(1.0f));  // ±1 toward x's sign
  q = _mm256_add_ps(q, _mm256_and_ps(_mm256_cmp_ps(r_away, half, _CMP_GE_OQ), step));
  return _mm256_sub_ps(q, _mm256_and_ps(_mm256_cmp_ps(r_away, neg_half, _CMP_LT_OQ), step));
}

LARQL_AVX2 bool encode_i8_row(const float* in, size_t n, uint8_t* block) {
  const uint32_t max_bits = max_abs_bits(in, n);
  if (max_bits >= 0x7f800000u) return false;  // NaN or inf in the row
  const float max_abs = std::bit_cast<float>(max_bits);
  const float scale = i8_scale_for_max(max_abs);
  if (!i8_scale_is_valid(scale)) return false;
  write_i8_block_header(block, scale);
  int8_t* q = reinterpret_cast<int8_t*>(block + kI8BlockHeaderBytes);
  if (max_abs == 0.0f) {
    std::memset(q, 0, n);
    return true;
  }
  const float inv = 127.0f / max_abs;
  if (!std::isfinite(inv)) {  // subnormal row maximum: divide, as the scalar oracle does
    for (size_t i = 0; i < n; ++i) q[i] = clamp_i8(std::round(in[i] / scale));
    return true;
  }
  const __m256 vinv = _mm256_set1_ps(inv), vscale = _mm256_set1_ps(scale);
  const __m256 vhalf = _mm256_set1_ps(0.5f * scale), vneg_half = _mm256_set1_ps(-0.5f * scale);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    __m256 v0 = _mm256_loadu_ps(in + i), v1 = _mm256_loadu_ps(in + i + 8);
    __m256 v2 = _mm256_loadu_ps(in + i + 16), v3 = _mm256_loadu_ps(in + i + 24);
    __m256 n0, n1, n2, n3;
    __m256 q0 = round_q(v0, vinv, vscale, vhalf, &n0), q1 = round_q(v1, vinv, vscale, vhalf, &n1);
    __m256 q2 = round_q(v2, vinv, vscale, vhalf, &n2), q3 = round_q(v3, vinv, vscale, vhalf, &n3);
    const __m256 any = _mm256_or_ps(_mm256_or_ps(n0, n1), _mm256_or_ps(n2, n3));
    if (!_mm256_testz_ps(any, any)) {
      q0 = correct_q(v0, q0, vscale, vhalf, vneg_half);
      q1 = correct_q(v1, q1, vscale, vhalf, vneg_half);
      q2 = correct_q(v2, q2, vscale, vhalf, vneg_half);
      q3 = correct_q(v3, q3, vscale, vhalf, vneg_half);
    }
    const __m256i packed = _mm256_packs_epi16(_mm256_packs_epi32(_mm256_cvtps_epi32(q0), _mm256_cvtps_epi32(q1)),
                                              _mm256_packs_epi32(_mm256_cvtps_epi32(q2), _mm256_cvtps_epi32(q3)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + i), _mm256_permutevar8x32_epi32(packed, order));
  }
  for (; i < n; ++i) q[i] = clamp_i8(quantize_one(in[i], inv, scale));
  return true;
}

LARQL_AVX2 void decode_i8_row(const uint8_t* q, size_t n, float scale, float* out) {
  const __m256 s = _mm256_set1_ps(scale);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + i));
    __m256 lo = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(raw));
    __m256 hi = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(raw, 8)));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(lo, s));
    _mm256_storeu_ps(out + i + 8, _mm256_mul_ps(hi, s));
  }
  for (; i < n; ++i) out[i] = static_cast<float>(static_cast<int8_t>(q[i])) * scale;
}

// Eight blocks at a time: their scales in one vector (the divisions and f16 conversions
// of eight blocks in one instruction each), then each block with q8_quantize8_fast.
LARQL_AVX2 bool encode_q8(const float* in, size_t n, uint8_t* blocks) {
  const size_t count = n / kQ8BlockValues;
  size_t b = 0;
  for (; b + 8 <= count; b += 8) {
    Q8Scales8 scales;
    if (!q8_scales8(in + b * kQ8BlockValues, &scales)) return false;
    __m256 max_off = _mm256_setzero_ps();
    for (size_t i = 0; i < 8; ++i) {
      const float* x = in + (b + i) * kQ8BlockValues;
      uint8_t* dst = blocks + (b + i) * kQ8BlockBytes;
      std::memcpy(dst, &scales.h[i], 2);
      const __m256 inv_d = _mm256_permutevar8x32_ps(scales.inv_d, _mm256_set1_epi32(int(i)));
      const __m256i q0 = q8_quantize8_fast(_mm256_loadu_ps(x), inv_d, &max_off);
      const __m256i q1 = q8_quantize8_fast(_mm256_loadu_ps(x + 8), inv_d, &max_off);
      const __m256i q2 = q8_quantize8_fast(_mm256_loadu_ps(x + 16), inv_d, &max_off);
      const __m256i q3 = q8_quantize8_fast(_mm256_loadu_ps(x + 24), inv_d, &max_off);
      q8_store_block(q0, q1, q2, q3, dst + 2);
    }
    const __m256 near = _mm256_cmp_ps(max_off, _mm256_set1_ps(kQ8NearTie), _CMP_GE_OQ);
    if (!_mm256_testz_ps(near, near))  // rare: some quotient within 2^-14 of a .5
      for (size_t i = 0; i < 8; ++i)
        q8_quantize_block_exact(in + (b + i) * kQ8BlockValues, scales.h[i], blocks + (b + i) * kQ8BlockBytes + 2);
  }
  for (; b < count; ++b)
    if (!q8_encode_block_exact(in + b * kQ8BlockValues, blocks + b * kQ8BlockBytes)) return false;
  return true;
}

LARQL_AVX2 bool decode_q8(const uint8_t* blocks, size_t n, float* out) {
  for (size_t b = 0; b < n / kQ8BlockValues; ++b, blocks += kQ8BlockBytes, out += kQ8BlockValues) {
    uint16_t h;
    std::memcpy(&h, blocks, 2);
    if (!q8_scale_is_valid(h)) return false;
    const __m256 d = _mm256_set1_ps(f16_to_f32(h));
    const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blocks + 2));
    const __m128i lo = _mm256_castsi256_si128(raw), hi = _mm256_extracti128_si256(raw, 1);
    _mm256_storeu_ps(out, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo)), d));
    _mm256_storeu_ps(out + 8, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(lo, 8))), d));
    _mm256_storeu_ps(out + 16, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi)), d));
    _mm256_storeu_ps(out + 24, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(hi, 8))), d));
  }
  return true;
}

bool encode_i8_row_wide(const float* in, size_t n, uint8_t* block) {
  return encode_i8_row_avx512(in, n, block, quantize_one);
}

}  // namespace

namespace {
const WireKernels kAvx2{"avx2+f16c+fma", encode_f32, decode_f32, encode_f16, decode_f16, encode_i8_row, decode_i8_row,
                        encode_q8, decode_q8};
const WireKernels kAvx512{"avx2+f16c+fma, avx512bw i8/q8",
                          encode_f32,
                          decode_f32,
                          encode_f16,
                          decode_f16,
                          encode_i8_row_wide,
                          decode_i8_row,
                          encode_q8_avx512,
                          decode_q8_avx512};
}  // namespace

std::vector<const WireKernels*> supported_kernels() {
  std::vector<const WireKernels*> tables{&scalar_kernels()};
  if (cpu_has_avx2_fma_f16c()) tables.push_back(&kAvx2);
  if (cpu_has_avx2_fma_f16c() && cpu_has_avx512f_bw()) tables.push_back(&kAvx512);
  return tables;
}

const WireKernels& best_kernels() {
  static const WireKernels& chosen = *supported_kernels().back();
  return chosen;
}

}  // namespace larql::wire

#else  // not x86-64: the scalar kernels are the only ones

#include "wire/kernels.h"
namespace larql::wire {
std::vector<const WireKernels*> supported_kernels() { return {&scalar_kernels()}; }
const WireKernels& best_kernels() { return scalar_kernels(); }
}  // namespace larql::wire

#endif
