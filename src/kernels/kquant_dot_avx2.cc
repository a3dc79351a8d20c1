// AVX2 version of kquant_dot.h's contract: a super-block's stored integers (unsigned,
// ≤ 63) times the activations by vpmaddubsw (exact: a pair's sum is at most 2 · 63 · 127),
// each block's (q6_k: each 16 values') scale applied by vpmaddwd into int32 lanes, the
// lanes summed once per super-block, then the contract's float steps. Any order of the
// integer sums gives the same S and M, so the float steps see the scalar version's values.
//
// kquant_dot_avx2_vnni.cc compiles this file again for CPUs with AVX-VNNI, where vpdpwssd
// applies a scale and adds in one instruction.
#if defined(__x86_64__)

#include <immintrin.h>

#include <cmath>

#include "kernels/block_unpack_avx2.h"
#include "kernels/kquant_dot.h"
#include "kernels/matvec_tiles.h"

#ifndef LARQL_AVX_VNNI
#define LARQL_AVX_VNNI 0
#endif
#if LARQL_AVX_VNNI
#define LARQL_KQUANT_AVX2 __attribute__((target("avx2,fma,f16c,avxvnni")))
#define LARQL_KQUANT_TILE kquant_tile_avx2_vnni
#else
#define LARQL_KQUANT_AVX2 LARQL_AVX2
#define LARQL_KQUANT_TILE kquant_tile_avx2
#endif

namespace larql {
namespace {

// acc + the products of a's and b's 16-bit pairs, summed by pairs into int32 lanes.
LARQL_KQUANT_AVX2 inline __m256i add_pair_products(__m256i acc, __m256i a, __m256i b) {
#if LARQL_AVX_VNNI
  return _mm256_dpwssd_avx_epi32(acc, a, b);
#else
  return _mm256_add_epi32(acc, _mm256_madd_epi16(a, b));
#endif
}

// Bits from..from+N−1 of each byte moved to bit `to` and up, the rest zero. 16-bit shifts:
// the bits that cross into the other byte of a pair are masked off.
template <int N>
LARQL_KQUANT_AVX2 inline __m256i move_bits(__m256i bytes, int from, int to) {
  const __m256i mask = _mm256_set1_epi8(char(((1 << N) - 1) << to));
  const int shift = to - from;
  if (shift > 0) return _mm256_and_si256(_mm256_slli_epi16(bytes, shift), mask);
  if (shift < 0) return _mm256_and_si256(_mm256_srli_epi16(bytes, -shift), mask);
  return _mm256_and_si256(bytes, mask);
}

LARQL_KQUANT_AVX2 inline __m256i load32(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// Block k's 32 stored integers n (q4_k 0..15, q5_k 0..31, q6_k 0..63) of super-block sb.
// A pair of blocks shares its loads, which the compiler merges where both are inlined.
template <DType T>
LARQL_KQUANT_AVX2 inline __m256i block_integers(const uint8_t* sb, int k) {
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  if constexpr (T == DType::q6_k) {
    using L = blocks::Q6Layout;
    const int half = k / 4, i = k % 4;
    const __m256i ql = load32(sb + L::ql + 64 * half + 32 * (i % 2));
    const __m256i low = _mm256_and_si256(i < 2 ? ql : _mm256_srli_epi16(ql, 4), low4);
    return _mm256_or_si256(low, move_bits<2>(load32(sb + L::qh + 32 * half), 2 * i, 4));
  } else {
    constexpr blocks::KLayout L = blocks::k_layout<T>();
    const __m256i qs = load32(sb + L.qs + 32 * (k / 2));
    const __m256i low = _mm256_and_si256(k % 2 == 0 ? qs : _mm256_srli_epi16(qs, 4), low4);
    if constexpr (L.qh == 0) return low;
    else return _mm256_or_si256(low, move_bits<1>(load32(sb + L.qh), k, 4));
  }
}

// A super-block's scales as the products take them.
template <DType T>
struct SuperScales {
  __m128i packed;  // q4_k/q5_k: s_0..7, m_0..7; q6_k: sc_0..15
  __m256i wide;    // q4_k/q5_k: s_0..7 as 16-bit, in both halves

  LARQL_KQUANT_AVX2 explicit SuperScales(const uint8_t* sb) {
    if constexpr (T == DType::q6_k) {
      packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(sb + blocks::Q6Layout::scales));
    } else {
      packed = unpack_scales_mins(sb + blocks::k_layout<T>().scales);
      wide = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(packed));
    }
  }
  // Block k's 16-bit pairs' factors: sc_k (q6_k: sc_2k for values 0-15, sc_2k+1 for 16-31).
  LARQL_KQUANT_AVX2 __m256i block(int k) const {
    if constexpr (T == DType::q6_k) {
      const char a = char(2 * k), b = char(2 * k + 1);
      return _mm256_cvtepi8_epi16(_mm_shuffle_epi8(packed, _mm_setr_epi8(a, a, a, a, a, a, a, a, b, b, b, b, b, b, b, b)));
    } else {
      return _mm256_shuffle_epi8(wide, _mm256_set1_epi16(short(0x0100 + 0x0202 * k)));
    }
  }
  // What multiplies the activations' sums of sixteen: q6_k sc_0..15 (the −32 · b_i terms);
  // q4_k/q5_k m_0, m_0, m_1, m_1 .. m_7, m_7 (M).
  LARQL_KQUANT_AVX2 __m256i fold() const {
    if constexpr (T == DType::q6_k) return _mm256_cvtepi8_epi16(packed);
    else return _mm256_cvtepu8_epi16(_mm_shuffle_epi8(packed, _mm_setr_epi8(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15)));
  }
};

// A super-block's d (and dmin): lanes 0 (and 1), by F16C.
template <DType T>
LARQL_KQUANT_AVX2 inline __m128 super_block_scales(const uint8_t* sb) {
  if constexpr (T == DType::q6_k) return _mm_cvtph_ps(_mm_cvtsi32_si128(blocks::load_u16(sb + blocks::Q6Layout::d)));
  return _mm_cvtph_ps(_mm_cvtsi32_si128(int(blocks::load_u32(sb))));  // d, dmin
}

// [S, M, S, M] from s (the S lanes, q6_k's fold not yet taken off) and m = madd(fold, b).
template <DType T>
LARQL_KQUANT_AVX2 inline __m128i reduce(__m256i s, __m256i m) {
  if constexpr (T == DType::q6_k) s = _mm256_sub_epi32(s, _mm256_slli_epi32(m, 5));
  const __m256i h = _mm256_hadd_epi32(s, m);  // q6_k's M lanes hold its fold, unused
  const __m128i q = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
  return _mm_hadd_epi32(q, q);
}

// The contract's S and M for one token's super-block (qx its 256 integers, b its 16 sums),
// the weights' integers and factors from `integers(k)` and `factors(k)` for block k.
template <DType T, class Integers, class Factors>
LARQL_KQUANT_AVX2 inline __m128i super_block_sums(Integers&& integers, Factors&& factors, __m256i fold, const int8_t* qx,
                                                  const int16_t* b) {
  __m256i s = _mm256_setzero_si256();
  for (int k = 0; k < 8; ++k) s = add_pair_products(s, _mm256_maddubs_epi16(integers(k), load32(qx + 32 * k)), factors(k));
  return reduce<T>(s, _mm256_madd_epi16(fold, load32(b)));
}

// The contract's float steps for one super-block, in lane 0 of acc: sm is [S, M, ..],
// scales [d, dmin, ..] and dx the activations' scale.
template <DType T>
LARQL_KQUANT_AVX2 inline __m128 float_steps(__m128 acc, __m128i sm, __m128 scales, float dx) {
  const __m128 f = _mm_cvtepi32_ps(sm);                            // S and M, each rounded once
  const __m128 dd = _mm_mul_ps(scales, _mm_set1_ps(dx));           // d · dx, dmin · dx
  acc = _mm_fmadd_ss(dd, f, acc);                                  // + dd · S
  if constexpr (T != DType::q6_k) acc = _mm_fnmadd_ss(_mm_movehdup_ps(dd), _mm_movehdup_ps(f), acc);  // − dm · M
  return acc;
}

// Decode: one token, so each super-block's integers go straight from the weights' bytes
// into the products, as llama.cpp's dot products take them.
template <DType T>
LARQL_KQUANT_AVX2 void decode_tile(const Tile& t) {
  const SuperBlockActivations& qa = *t.qk;
  const size_t supers = t.w->cols / q8k::kValues, sb_bytes = dtype_traits(T).block_bytes, token = t.t0;
  const int8_t* qx = qa.row_q(token);
  const int16_t* sums = qa.row_sums(token);
  const float* dx = qa.row_scales(token);
  for (size_t r = 0; r < t.nr; ++r) {
    const uint8_t* row = t.w->row_ptr(t.r0 + r);
    __m128 acc = _mm_setzero_ps();
    for (size_t s = 0; s < supers; ++s) {
      const uint8_t* sb = row + s * sb_bytes;
      const SuperScales<T> scales(sb);
      const __m128i sm = super_block_sums<T>([&](int k) LARQL_KQUANT_AVX2 { return block_integers<T>(sb, k); },
                                             [&](int k) LARQL_KQUANT_AVX2 { return scales.block(k); }, scales.fold(),
                                             qx + s * q8k::kValues, sums + s * (q8k::kValues / q8k::kGroup));
      acc = float_steps<T>(acc, sm, super_block_scales<T>(sb), dx[s]);
    }
    t.y[token * t.w->rows + t.r0 + r] = _mm_cvtss_f32(acc);
  }
}

// Prefill (AVX2 CPUs): each super-block of a row unpacked once for the tile's tokens.
template <DType T>
LARQL_KQUANT_AVX2 void prefill_tile(const Tile& t) {
  const SuperBlockActivations& qa = *t.qk;
  const size_t supers = t.w->cols / q8k::kValues, sb_bytes = dtype_traits(T).block_bytes;
  for (size_t r = 0; r < t.nr; ++r) {
    const uint8_t* row = t.w->row_ptr(t.r0 + r);
    __m128 acc[kKquantTileTokens];
    for (__m128& a : acc) a = _mm_setzero_ps();
    for (size_t s = 0; s < supers; ++s) {
      const uint8_t* sb = row + s * sb_bytes;
      const SuperScales<T> scales(sb);
      __m256i n[8], factors[8];
      for (int k = 0; k < 8; ++k) n[k] = block_integers<T>(sb, k), factors[k] = scales.block(k);
      const __m256i fold = scales.fold();
      const __m128 d = super_block_scales<T>(sb);
      for (size_t j = 0; j < t.nt; ++j) {
        const size_t token = t.t0 + j;
        const __m128i sm = super_block_sums<T>([&](int k) LARQL_KQUANT_AVX2 { return n[k]; }, [&](int k) LARQL_KQUANT_AVX2 { return factors[k]; },
                                               fold, qa.row_q(token) + s * q8k::kValues, qa.row_sums(token) + s * (q8k::kValues / q8k::kGroup));
        acc[j] = float_steps<T>(acc[j], sm, d, qa.row_scales(token)[s]);
      }
    }
    for (size_t j = 0; j < t.nt; ++j) t.y[(t.t0 + j) * t.w->rows + t.r0 + r] = _mm_cvtss_f32(acc[j]);
  }
}

template <DType T>
LARQL_KQUANT_AVX2 void tile(const Tile& t) {
  if (t.nt == 1) decode_tile<T>(t);
  else prefill_tile<T>(t);
}

}  // namespace

#if !LARQL_AVX_VNNI
LARQL_AVX2 void quantize_super_block_row_avx2(const float* x, SuperBlockActivations& qa, size_t r) {
  for (size_t s = 0; s < qa.supers; ++s) {
    int8_t* qx = &qa.q[r * qa.cols + s * q8k::kValues];
    qa.scale[r * qa.supers + s] = quantize_to_int8_avx2(x + r * qa.cols + s * q8k::kValues, q8k::kValues, qx);
    int16_t* sums = &qa.sums[(r * qa.cols + s * q8k::kValues) / q8k::kGroup];
    for (size_t c = 0; c < q8k::kValues; c += 32) {
      // Sums of four, then of sixteen: values c .. c+15 in the low half, c+16 .. c+31 in the high.
      __m256i h = sums_of_four(load32(qx + c));
      h = _mm256_hadd_epi32(h, h);
      h = _mm256_hadd_epi32(h, h);
      sums[c / 16] = int16_t(_mm_cvtsi128_si32(_mm256_castsi256_si128(h)));
      sums[c / 16 + 1] = int16_t(_mm_cvtsi128_si32(_mm256_extracti128_si256(h, 1)));
    }
  }
}
#endif

void LARQL_KQUANT_TILE(const Tile& t) {
  blocks::with_kquant_format(t.w->dtype, [&]<DType T>() { tile<T>(t); });
}

}  // namespace larql

#endif
