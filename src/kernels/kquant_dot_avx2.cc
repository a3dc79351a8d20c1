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

// One row's super-block as the tile multiplies it.
struct SuperWeights {
  __m256i n[8];      // block k's 32 stored integers
  __m256i scale[8];  // block k's scales as 16-bit pairs' factors: sc_k (q6_k: sc_2k for values 0-15, sc_2k+1 for 16-31)
  __m256i fold;      // q6_k: sc_0..15 (the −32 · b_i terms); q4_k/q5_k: m_0, m_0, m_1, m_1 .. m_7, m_7 (M)
  __m128 scales;     // d, dmin (super_block_scales)
};

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

// A super-block's d (and dmin): lanes 0 (and 1), by F16C.
template <DType T>
LARQL_KQUANT_AVX2 inline __m128 super_block_scales(const uint8_t* sb) {
  if constexpr (T == DType::q6_k) return _mm_cvtph_ps(_mm_cvtsi32_si128(blocks::load_u16(sb + blocks::Q6Layout::d)));
  return _mm_cvtph_ps(_mm_cvtsi32_si128(int(blocks::load_u32(sb))));  // d, dmin
}

template <DType T>
LARQL_KQUANT_AVX2 inline void unpack(const uint8_t* sb, SuperWeights& w) {
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  if constexpr (T == DType::q6_k) {
    using L = blocks::Q6Layout;
    for (int half = 0; half < 2; ++half) {
      const __m256i ql0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(sb + L::ql + 64 * half));
      const __m256i ql1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(sb + L::ql + 64 * half + 32));
      const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(sb + L::qh + 32 * half));
      w.n[4 * half + 0] = _mm256_or_si256(_mm256_and_si256(ql0, low4), move_bits<2>(qh, 0, 4));
      w.n[4 * half + 1] = _mm256_or_si256(_mm256_and_si256(ql1, low4), move_bits<2>(qh, 2, 4));
      w.n[4 * half + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4), move_bits<2>(qh, 4, 4));
      w.n[4 * half + 3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4), move_bits<2>(qh, 6, 4));
    }
    const __m128i sc = _mm_loadu_si128(reinterpret_cast<const __m128i*>(sb + L::scales));
    for (int k = 0; k < 8; ++k) {
      const char a = char(2 * k), b = char(2 * k + 1);
      const __m128i pick = _mm_setr_epi8(a, a, a, a, a, a, a, a, b, b, b, b, b, b, b, b);
      w.scale[k] = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(sc, pick));
    }
    w.fold = _mm256_cvtepi8_epi16(sc);
  } else {
    constexpr blocks::KLayout L = blocks::k_layout<T>();
    __m256i qh = _mm256_setzero_si256();
    if constexpr (L.qh != 0) qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(sb + L.qh));
    for (int pair = 0; pair < 4; ++pair) {
      const __m256i qs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(sb + L.qs + 32 * pair));
      w.n[2 * pair] = _mm256_and_si256(qs, low4);
      w.n[2 * pair + 1] = _mm256_and_si256(_mm256_srli_epi16(qs, 4), low4);
      if constexpr (L.qh != 0) {
        w.n[2 * pair] = _mm256_or_si256(w.n[2 * pair], move_bits<1>(qh, 2 * pair, 4));
        w.n[2 * pair + 1] = _mm256_or_si256(w.n[2 * pair + 1], move_bits<1>(qh, 2 * pair + 1, 4));
      }
    }
    const __m128i sm = unpack_scales_mins(sb + L.scales);  // s_0..7, m_0..7
    const __m256i scales = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sm));
    for (int k = 0; k < 8; ++k) w.scale[k] = _mm256_shuffle_epi8(scales, _mm256_set1_epi16(short(0x0100 + 0x0202 * k)));
    w.fold = _mm256_cvtepu8_epi16(_mm_shuffle_epi8(sm, _mm_setr_epi8(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15)));
  }
  w.scales = super_block_scales<T>(sb);
}

// [S, M, S, M] from s (the S lanes, q6_k's fold not yet taken off) and m = madd(fold, b).
template <DType T>
LARQL_KQUANT_AVX2 inline __m128i reduce(__m256i s, __m256i m) {
  if constexpr (T == DType::q6_k) s = _mm256_sub_epi32(s, _mm256_slli_epi32(m, 5));
  const __m256i h = _mm256_hadd_epi32(s, m);  // q6_k's M lanes hold its fold, unused
  const __m128i q = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
  return _mm_hadd_epi32(q, q);
}

// The contract's S and M for one token's super-block (qx its 256 integers, b its 16 sums).
template <DType T>
LARQL_KQUANT_AVX2 inline __m128i integers(const SuperWeights& w, const int8_t* qx, const int16_t* b) {
  __m256i s = _mm256_setzero_si256();
  for (int k = 0; k < 8; ++k) {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qx + 32 * k));
    s = add_pair_products(s, _mm256_maddubs_epi16(w.n[k], x), w.scale[k]);
  }
  return reduce<T>(s, _mm256_madd_epi16(w.fold, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b))));
}

// Decode: one token, so each super-block's integers go straight from the weights' bytes
// into the products, as llama.cpp's dot products take them, without unpack's copy.
template <DType T>
LARQL_KQUANT_AVX2 inline __m128i decode_integers(const uint8_t* sb, const int8_t* qx, const int16_t* b) {
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  const __m256i sums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b));
  __m256i s = _mm256_setzero_si256();
  auto add = [&](int k, __m256i n, __m256i scale) LARQL_KQUANT_AVX2 {
    s = add_pair_products(s, _mm256_maddubs_epi16(n, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qx + 32 * k))), scale);
  };
  if constexpr (T == DType::q6_k) {
    using L = blocks::Q6Layout;
    const __m128i sc = _mm_loadu_si128(reinterpret_cast<const __m128i*>(sb + L::scales));
    auto scale = [&](int k) LARQL_KQUANT_AVX2 {
      const char a = char(2 * k), c = char(2 * k + 1);
      return _mm256_cvtepi8_epi16(_mm_shuffle_epi8(sc, _mm_setr_epi8(a, a, a, a, a, a, a, a, c, c, c, c, c, c, c, c)));
    };
    for (int half = 0; half < 2; ++half) {
      const __m256i ql0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(sb + L::ql + 64 * half));
      const __m256i ql1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(sb + L::ql + 64 * half + 32));
      const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(sb + L::qh + 32 * half));
      add(4 * half + 0, _mm256_or_si256(_mm256_and_si256(ql0, low4), move_bits<2>(qh, 0, 4)), scale(4 * half + 0));
      add(4 * half + 1, _mm256_or_si256(_mm256_and_si256(ql1, low4), move_bits<2>(qh, 2, 4)), scale(4 * half + 1));
      add(4 * half + 2, _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4), move_bits<2>(qh, 4, 4)), scale(4 * half + 2));
      add(4 * half + 3, _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4), move_bits<2>(qh, 6, 4)), scale(4 * half + 3));
    }
    return reduce<T>(s, _mm256_madd_epi16(_mm256_cvtepi8_epi16(sc), sums));
  } else {
    constexpr blocks::KLayout L = blocks::k_layout<T>();
    const __m128i sm = unpack_scales_mins(sb + L.scales);  // s_0..7, m_0..7
    const __m256i scales = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sm));
    auto scale = [&](int k) LARQL_KQUANT_AVX2 { return _mm256_shuffle_epi8(scales, _mm256_set1_epi16(short(0x0100 + 0x0202 * k))); };
    __m256i qh = _mm256_setzero_si256();
    if constexpr (L.qh != 0) qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(sb + L.qh));
    for (int pair = 0; pair < 4; ++pair) {
      const __m256i qs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(sb + L.qs + 32 * pair));
      __m256i even = _mm256_and_si256(qs, low4), odd = _mm256_and_si256(_mm256_srli_epi16(qs, 4), low4);
      if constexpr (L.qh != 0) {
        even = _mm256_or_si256(even, move_bits<1>(qh, 2 * pair, 4));
        odd = _mm256_or_si256(odd, move_bits<1>(qh, 2 * pair + 1, 4));
      }
      add(2 * pair, even, scale(2 * pair));
      add(2 * pair + 1, odd, scale(2 * pair + 1));
    }
    const __m256i fold = _mm256_cvtepu8_epi16(_mm_shuffle_epi8(sm, _mm_setr_epi8(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15)));
    return reduce<T>(s, _mm256_madd_epi16(fold, sums));
  }
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
      const __m128i sm = decode_integers<T>(sb, qx + s * q8k::kValues, sums + s * (q8k::kValues / q8k::kGroup));
      acc = float_steps<T>(acc, sm, super_block_scales<T>(sb), dx[s]);
    }
    t.y[token * t.w->rows + t.r0 + r] = _mm_cvtss_f32(acc);
  }
}

template <DType T>
LARQL_KQUANT_AVX2 void tile(const Tile& t) {
  if (t.nt == 1) return decode_tile<T>(t);
  const SuperBlockActivations& qa = *t.qk;
  const size_t supers = t.w->cols / q8k::kValues, sb_bytes = dtype_traits(T).block_bytes;
  for (size_t r = 0; r < t.nr; ++r) {
    const uint8_t* row = t.w->row_ptr(t.r0 + r);
    __m128 acc[kKquantTileTokens];
    for (__m128& a : acc) a = _mm_setzero_ps();
    for (size_t s = 0; s < supers; ++s) {
      SuperWeights w;
      unpack<T>(row + s * sb_bytes, w);
      for (size_t j = 0; j < t.nt; ++j) {
        const size_t token = t.t0 + j;
        const __m128i sm = integers<T>(w, qa.row_q(token) + s * q8k::kValues, qa.row_sums(token) + s * (q8k::kValues / q8k::kGroup));
        acc[j] = float_steps<T>(acc[j], sm, w.scales, qa.row_scales(token)[s]);
      }
    }
    for (size_t j = 0; j < t.nt; ++j) t.y[(t.t0 + j) * t.w->rows + t.r0 + r] = _mm_cvtss_f32(acc[j]);
  }
}

}  // namespace

#if !LARQL_AVX_VNNI
LARQL_AVX2 void quantize_super_block_row_avx2(const float* x, SuperBlockActivations& qa, size_t r) {
  const __m256 sign = _mm256_set1_ps(-0.0f), lo = _mm256_set1_ps(-127.0f), hi = _mm256_set1_ps(127.0f);
  const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1), order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (size_t s = 0; s < qa.supers; ++s) {
    const float* v = x + r * qa.cols + s * q8k::kValues;
    __m256 amax8 = _mm256_setzero_ps();
    int finite = 0xff;
    for (size_t i = 0; i < q8k::kValues; i += 8) {
      const __m256 part = _mm256_loadu_ps(v + i);
      finite &= _mm256_movemask_ps(_mm256_cmp_ps(_mm256_sub_ps(part, part), _mm256_setzero_ps(), _CMP_EQ_OQ));
      amax8 = _mm256_max_ps(amax8, _mm256_andnot_ps(sign, part));
    }
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(amax8), _mm256_extractf128_ps(amax8, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    const auto [d, inverse] = activation_scale(_mm_cvtss_f32(m), finite == 0xff);
    int8_t* qx = &qa.q[r * qa.cols + s * q8k::kValues];
    int16_t* sums = &qa.sums[(r * qa.cols + s * q8k::kValues) / q8k::kGroup];
    for (size_t c = 0; c < q8k::kValues; c += 32) {
      __m256i q = _mm256_setzero_si256();
      if (finite == 0xff) {
        __m256i n[4];
        for (int i = 0; i < 4; ++i)
          n[i] = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(_mm256_mul_ps(_mm256_loadu_ps(v + c + 8 * i), _mm256_set1_ps(inverse)), lo), hi));
        // Packing interleaves the 128-bit lanes; the permutation puts the values back in order.
        q = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(_mm256_packs_epi32(n[0], n[1]), _mm256_packs_epi32(n[2], n[3])), order);
      }
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(qx + c), q);
      // Sums of four, then of sixteen: values c .. c+15 in the low half, c+16 .. c+31 in the high.
      __m256i h = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, q), ones16);
      h = _mm256_hadd_epi32(h, h);
      h = _mm256_hadd_epi32(h, h);
      sums[c / 16] = int16_t(_mm_cvtsi128_si32(_mm256_castsi256_si128(h)));
      sums[c / 16 + 1] = int16_t(_mm_cvtsi128_si32(_mm256_extracti128_si256(h, 1)));
    }
    qa.scale[r * qa.supers + s] = d;
  }
}
#endif

void LARQL_KQUANT_TILE(const Tile& t) {
  blocks::with_kquant_format(t.w->dtype, [&]<DType T>() { tile<T>(t); });
}

}  // namespace larql

#endif
