// Test-only (LARQL_EMULATE_AVX512, through simd_avx512.h): the AVX-512 intrinsics larql
// uses that SIMDe 0.7.4 (Debian 12) lacks or gets wrong, written from the Intel SDM's
// definitions on SIMDe's types, AVX2 halves where an AVX2 instruction computes the same.
// The emulated kernels run only in the tests, against the same oracles as the native ones;
// the native ones still run wherever the CPU has AVX-512.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace larql_avx512_emulation {

inline simde__m512i from_halves(__m256i lo, __m256i hi) {
  simde__m512i_private r;
  r.m256i[0] = lo, r.m256i[1] = hi;
  return simde__m512i_from_private(r);
}

inline simde__m512 from_halves(__m256 lo, __m256 hi) {
  simde__m512_private r;
  r.m256[0] = lo, r.m256[1] = hi;
  return simde__m512_from_private(r);
}

// Conversions that are two AVX2 ones (the same rounding under the same MXCSR).
inline simde__m512 cvtepi32_ps(simde__m512i a) {
  const simde__m512i_private a_ = simde__m512i_to_private(a);
  return from_halves(_mm256_cvtepi32_ps(a_.m256i[0]), _mm256_cvtepi32_ps(a_.m256i[1]));
}
inline simde__m512i cvtps_epi32(simde__m512 a) {
  const simde__m512_private a_ = simde__m512_to_private(a);
  return from_halves(_mm256_cvtps_epi32(a_.m256[0]), _mm256_cvtps_epi32(a_.m256[1]));
}
inline simde__m512i cvtepi8_epi32(__m128i a) { return from_halves(_mm256_cvtepi8_epi32(a), _mm256_cvtepi8_epi32(_mm_srli_si128(a, 8))); }
inline simde__m512i cvtepu8_epi32(__m128i a) { return from_halves(_mm256_cvtepu8_epi32(a), _mm256_cvtepu8_epi32(_mm_srli_si128(a, 8))); }
inline simde__m512i cvtepu16_epi32(__m256i a) {
  return from_halves(_mm256_cvtepu16_epi32(_mm256_castsi256_si128(a)), _mm256_cvtepu16_epi32(_mm256_extracti128_si256(a, 1)));
}
inline simde__m512 cvtph_ps(__m256i a) {
  return from_halves(_mm256_cvtph_ps(_mm256_castsi256_si128(a)), _mm256_cvtph_ps(_mm256_extracti128_si256(a, 1)));
}

// Lane i is fma(a, b, c) where bit i of k is set, else c.
inline simde__m512 mask3_fmadd_ps(simde__m512 a, simde__m512 b, simde__m512 c, simde__mmask16 k) {
  const simde__m512_private a_ = simde__m512_to_private(a), b_ = simde__m512_to_private(b);
  simde__m512_private r = simde__m512_to_private(c);
  for (int h = 0; h < 2; ++h) {
    const __m256 sum = _mm256_fmadd_ps(a_.m256[h], b_.m256[h], r.m256[h]);
    const __m256i bits = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    const __m256i lanes = _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32(int(k >> (8 * h)) & 0xff), bits), bits);
    r.m256[h] = _mm256_blendv_ps(r.m256[h], sum, _mm256_castsi256_ps(lanes));
  }
  return simde__m512_from_private(r);
}

// Masked loads and stores touch only the selected elements' bytes, as the instructions do.
template <typename Private, typename Element, typename Mask>
inline Private masked_load(Mask k, const void* p) {
  Private r;
  std::memset(&r, 0, sizeof r);
  Element* out = reinterpret_cast<Element*>(&r);
  for (size_t i = 0; i < sizeof r / sizeof(Element); ++i)
    if ((k >> i) & 1) std::memcpy(&out[i], static_cast<const Element*>(p) + i, sizeof(Element));
  return r;
}
inline simde__m512 maskz_loadu_ps(simde__mmask16 k, const void* p) {
  return simde__m512_from_private(masked_load<simde__m512_private, float>(k, p));
}
inline simde__m512i maskz_loadu_epi16(simde__mmask32 k, const void* p) {
  return simde__m512i_from_private(masked_load<simde__m512i_private, uint16_t>(k, p));
}
inline simde__m512i maskz_loadu_epi8(simde__mmask64 k, const void* p) {
  return simde__m512i_from_private(masked_load<simde__m512i_private, uint8_t>(k, p));
}
inline void mask_storeu_ps(void* p, simde__mmask16 k, simde__m512 a) {
  const simde__m512_private a_ = simde__m512_to_private(a);
  for (int i = 0; i < 16; ++i)
    if ((k >> i) & 1) std::memcpy(static_cast<float*>(p) + i, &a_.f32[i], sizeof(float));
}

inline simde__mmask16 kor(simde__mmask16 a, simde__mmask16 b) { return simde__mmask16(a | b); }

inline int32_t reduce_max_epi32(simde__m512i a) {
  const simde__m512i_private a_ = simde__m512i_to_private(a);
  int32_t m = a_.i32[0];
  for (int i = 1; i < 16; ++i) m = a_.i32[i] > m ? a_.i32[i] : m;
  return m;
}

// vdpbf16ps (SDM): per lane, the odd pair's product added first, then the even pair's,
// each exact product and sum rounded once to nearest even (a fused multiply-add: the
// product alone may overflow or be subnormal); subnormal inputs and results are zero
// (DAZ, FTZ). SIMDe adds the even product first, rounds the product, keeps subnormals.
inline float flush(float v) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  if ((u & 0x7f800000u) == 0) u &= 0x80000000u;
  std::memcpy(&v, &u, 4);
  return v;
}
inline float bf16_value(uint16_t h) {
  const uint32_t u = uint32_t(h) << 16;
  float v;
  std::memcpy(&v, &u, 4);
  return flush(v);
}
inline simde__m512 dpbf16_ps(simde__m512 src, simde__m512bh a, simde__m512bh b) {
  simde__m512_private r = simde__m512_to_private(src);
  uint16_t a16[32], b16[32];
  std::memcpy(a16, &a, sizeof a16);
  std::memcpy(b16, &b, sizeof b16);
  for (int i = 0; i < 16; ++i) {
    float acc = flush(r.f32[i]);
    acc = flush(std::fma(bf16_value(a16[2 * i + 1]), bf16_value(b16[2 * i + 1]), acc));
    acc = flush(std::fma(bf16_value(a16[2 * i]), bf16_value(b16[2 * i]), acc));
    r.f32[i] = acc;
  }
  return simde__m512_from_private(r);
}

// vcvtneps2bf16 (SDM): NaNs keep their top half, made quiet; subnormals become a signed
// zero (DAZ); the rest round to nearest even.
inline __m256i cvtneps_pbh(simde__m512 a) {
  const simde__m512_private a_ = simde__m512_to_private(a);
  uint16_t out[16];
  for (int i = 0; i < 16; ++i) {
    uint32_t u;
    std::memcpy(&u, &a_.f32[i], 4);
    if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu) != 0) out[i] = uint16_t((u >> 16) | 0x40);
    else if ((u & 0x7f800000u) == 0) out[i] = uint16_t((u >> 16) & 0x8000);
    else out[i] = uint16_t((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
  }
  __m256i r;
  std::memcpy(&r, out, sizeof r);
  return r;
}

}  // namespace larql_avx512_emulation

#define LARQL_EMULATED(name) larql_avx512_emulation::name
#define _mm512_cvtepi32_ps(a) LARQL_EMULATED(cvtepi32_ps)(a)
#define _mm512_cvtps_epi32(a) LARQL_EMULATED(cvtps_epi32)(a)
#define _mm512_cvtepi8_epi32(a) LARQL_EMULATED(cvtepi8_epi32)(a)
#define _mm512_cvtepu8_epi32(a) LARQL_EMULATED(cvtepu8_epi32)(a)
#define _mm512_cvtepu16_epi32(a) LARQL_EMULATED(cvtepu16_epi32)(a)
#define _mm512_cvtph_ps(a) LARQL_EMULATED(cvtph_ps)(a)
#define _mm512_mask3_fmadd_ps(a, b, c, k) LARQL_EMULATED(mask3_fmadd_ps)(a, b, c, k)
#define _mm512_maskz_loadu_ps(k, p) LARQL_EMULATED(maskz_loadu_ps)(k, p)
#define _mm512_maskz_loadu_epi16(k, p) LARQL_EMULATED(maskz_loadu_epi16)(k, p)
#define _mm512_maskz_loadu_epi8(k, p) LARQL_EMULATED(maskz_loadu_epi8)(k, p)
#define _mm512_mask_storeu_ps(p, k, a) LARQL_EMULATED(mask_storeu_ps)(p, k, a)
#define _mm512_kor(a, b) LARQL_EMULATED(kor)(a, b)
#define _mm512_reduce_max_epi32(a) LARQL_EMULATED(reduce_max_epi32)(a)
#define _mm512_cvtneps_pbh(a) LARQL_EMULATED(cvtneps_pbh)(a)
#undef _mm512_dpbf16_ps
#define _mm512_dpbf16_ps(src, a, b) LARQL_EMULATED(dpbf16_ps)(src, a, b)
// SIMDe aliases these with the wrong arity or not at all.
#undef _mm512_madd_epi16
#define _mm512_madd_epi16(a, b) simde_mm512_madd_epi16(a, b)
#define _mm512_shuffle_f32x4(a, b, imm8) simde_mm512_shuffle_f32x4(a, b, imm8)
