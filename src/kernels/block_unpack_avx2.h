// Internal to the block-format tiles: a block's 32 integers (block_dot.h's qw) in a ymm
// register, and the activations' 8-bit rounding both block contracts share. AVX2 only, so
// the AVX-512 tiles inline it too.
#pragma once
#if defined(__x86_64__)

#include <immintrin.h>

#include "kernels/block_dot.h"
#include "kernels/block_formats.h"

#define LARQL_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace larql {

// Byte j is 0xFF where bit j of `bits` is set.
LARQL_AVX2 inline __m256i bytes_from_bits(uint32_t bits) {
  const __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32(int(bits)),
                                             _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202,
                                                               0x0101010101010101, 0x0000000000000000));
  return _mm256_cmpeq_epi8(_mm256_or_si256(spread, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe)), _mm256_set1_epi64x(-1));
}

// The 32 low parts of one block: q8_0's signed bytes, the 4- and 5-bit formats' nibbles, or
// mxfp4's values (signed, through its table).
template <DType T>
LARQL_AVX2 inline __m256i block_low_integers(const uint8_t* b) {
  if constexpr (T == DType::q8_0) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 2));
  } else {
    const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + blocks::layout<T>().qs));
    const __m128i low = _mm_set1_epi8(0x0F);
    const __m256i nibbles = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(packed, 4), low), _mm_and_si128(packed, low));
    if constexpr (T != DType::mxfp4) return nibbles;
    const __m128i values = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blocks::kMxfp4Values));
    return _mm256_shuffle_epi8(_mm256_set_m128i(values, values), nibbles);  // the codes' signed values
  }
}

// A block's scale d (block_formats.h's block_scale), by F16C where it is an f16.
template <DType T>
LARQL_AVX2 inline float block_scale_f16c(const uint8_t* b) {
  if constexpr (T == DType::mxfp4) return blocks::e8m0_half(b[0]);
  else return _cvtsh_ss(blocks::load_u16(b));
}

// The 32 stored integers of one block, before the format's zero point is subtracted:
// q8_0's and mxfp4's signed values, or the 4- and 5-bit formats' unsigned ones (0..15, 0..31).
template <DType T>
LARQL_AVX2 inline __m256i block_raw_integers(const uint8_t* b) {
  __m256i q = block_low_integers<T>(b);
  if constexpr (T != DType::q8_0) {
    constexpr size_t qh = blocks::layout<T>().qh;
    if constexpr (qh != 0) q = _mm256_or_si256(q, _mm256_and_si256(bytes_from_bits(blocks::load_u32(b + qh)), _mm256_set1_epi8(0x10)));
  }
  return q;
}

// block_formats.h's unpack_scales_mins by byte shuffles: s_0..7 then m_0..7 from the
// twelve packed bytes (16 read: a K-quant super-block goes on past them). s_0..3 and
// m_0..3 are bytes 0-3 and 4-7 of the packing, low six bits; s_4..7 and m_4..7 take
// bytes 8-11's low and high nibbles, with bits 6-7 of bytes 0-3 and 4-7 above them.
LARQL_AVX2 inline __m128i unpack_scales_mins(const uint8_t* packed) {
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(packed));
  const __m128i low = _mm_shuffle_epi8(bytes, _mm_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11));
  const __m128i top = _mm_shuffle_epi8(bytes, _mm_setr_epi8(-1, -1, -1, -1, 0, 1, 2, 3, -1, -1, -1, -1, 4, 5, 6, 7));
  // 16-bit shifts: what a byte takes from its neighbour is masked off.
  const __m128i low_bits = _mm_and_si128(low, _mm_setr_epi8(63, 63, 63, 63, 15, 15, 15, 15, 63, 63, 63, 63, 0, 0, 0, 0));
  const __m128i high_nibbles = _mm_and_si128(_mm_srli_epi16(low, 4), _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 15, 15, 15, 15));
  const __m128i top_bits = _mm_and_si128(_mm_srli_epi16(top, 2), _mm_setr_epi8(0, 0, 0, 0, 48, 48, 48, 48, 0, 0, 0, 0, 48, 48, 48, 48));
  return _mm_or_si128(_mm_or_si128(low_bits, high_nibbles), top_bits);
}

// block_dot.h's quantize_to_int8 by AVX2, the same bits: n values (a multiple of 32) to
// 8-bit integers with one scale, qx into q and dx returned.
LARQL_AVX2 inline float quantize_to_int8_avx2(const float* v, size_t n, int8_t* q) {
  const __m256 sign = _mm256_set1_ps(-0.0f), lo = _mm256_set1_ps(-127.0f), hi = _mm256_set1_ps(127.0f);
  __m256 amax8 = _mm256_setzero_ps();
  int finite = 0xff;
  for (size_t i = 0; i < n; i += 8) {
    const __m256 part = _mm256_loadu_ps(v + i);
    finite &= _mm256_movemask_ps(_mm256_cmp_ps(_mm256_sub_ps(part, part), _mm256_setzero_ps(), _CMP_EQ_OQ));
    amax8 = _mm256_max_ps(amax8, _mm256_andnot_ps(sign, part));
  }
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(amax8), _mm256_extractf128_ps(amax8, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  const auto [d, inverse] = activation_scale(_mm_cvtss_f32(m), finite == 0xff);
  for (size_t c = 0; c < n; c += 32) {
    __m256i packed = _mm256_setzero_si256();
    if (finite == 0xff) {
      __m256i r[4];
      for (int i = 0; i < 4; ++i)
        r[i] = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(_mm256_mul_ps(_mm256_loadu_ps(v + c + 8 * i), _mm256_set1_ps(inverse)), lo), hi));
      // Packing interleaves the 128-bit lanes; the permutation puts the values back in order.
      packed = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(_mm256_packs_epi32(r[0], r[1]), _mm256_packs_epi32(r[2], r[3])),
                                           _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + c), packed);
  }
  return d;
}

// The sums of each four of 32 8-bit integers, in order, as int32.
LARQL_AVX2 inline __m256i sums_of_four(__m256i q) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), q), _mm256_set1_epi16(1));
}

// The format's zero point: what is subtracted from a stored value (block_formats.h).
template <DType T>
constexpr int zero_point() {
  if constexpr (T == DType::q8_0) return 0;
  else return blocks::layout<T>().zero;
}

}  // namespace larql

#endif
