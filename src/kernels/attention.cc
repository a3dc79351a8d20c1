#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/matvec_tiles.h"

namespace larql {
namespace {

void key_scores_scalar(StridedRows queries, const float* keys, size_t n, size_t first, size_t end, float scale, float* out,
                       size_t out_stride) {
  for (size_t j = 0; j < queries.count; ++j)
    for (size_t p = first; p < end; ++p) {
      float s = 0;
      for (size_t d = 0; d < n; ++d) s = std::fma(queries.row(j)[d], keys[key_offset(p, d, n)], s);
      out[j * out_stride + p - first] = s * scale;
    }
}

// The lanes of a block's scores (positions p0, p0 + 1, ...) that fall in [first, end), into
// a row of scores that starts at position first.
void store_positions(const float* lanes, size_t count, size_t p0, size_t first, size_t end, float* row) {
  for (size_t p = std::max(p0, first); p < std::min(p0 + count, end); ++p) row[p - first] = lanes[p - p0];
}

void weighted_sum_scalar(StridedRows weights, StridedRows values, size_t n, float* out, bool accumulate) {
  for (size_t j = 0; j < weights.count; ++j, out += n) {
    const float* w = weights.row(j);
    if (!accumulate) std::memset(out, 0, n * sizeof(float));
    for (size_t r = 0; r < values.count; ++r)
      for (size_t i = 0; i < n; ++i) out[i] = std::fma(w[r], values.row(r)[i], out[i]);
  }
}

#if defined(__x86_64__)
// The sixteen lanes [i, i + 16) of a row of n values that exist.
inline __mmask16 present_lanes(size_t i, size_t n) {
  return i >= n ? __mmask16(0) : n - i >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - i)) - 1);
}

// Rows [0, count) of queries (or weights) in groups of four while four are left, then two,
// then one: run.template operator()<N>(the group's first row).
template <class Run>
void in_query_groups(size_t count, Run&& run) {
  for (size_t j = 0; j < count;) {
    const size_t left = count - j;
    if (left >= 4) run.template operator()<4>(j), j += 4;
    else if (left >= 2) run.template operator()<2>(j), j += 2;
    else run.template operator()<1>(j), j += 1;
  }
}

// Blocks of keys per call for NQ queries: sixteen accumulators for four queries, eight or
// sixteen for fewer, enough independent chains to cover the multiply-add's latency.
template <int NQ>
inline constexpr int kScoreBlocks = NQ == 4 ? 4 : 8;

// Queries q against NB blocks of keys from block b0: an accumulator per query and block,
// one position per lane. Positions of the blocks outside [first, end) are computed (the
// cache's blocks are whole: key_floats) but not written.
template <int NQ, int NB>
LARQL_AVX512_TARGET("avx512f") __attribute__((always_inline)) inline void score_blocks(const float* const (&q)[NQ], const float* keys,
                                                                                      size_t n, size_t b0, size_t first, size_t end,
                                                                                      __m512 scale, float* const (&out)[NQ]) {
  __m512 acc[NQ][NB];
  LARQL_UNROLL_16 for (int j = 0; j < NQ; ++j)
    LARQL_UNROLL_16 for (int b = 0; b < NB; ++b) acc[j][b] = _mm512_setzero_ps();
  const float* k = keys + b0 * kKeyBlock * n;
  for (size_t d = 0; d < n; ++d) {
    __m512 kv[NB];
    LARQL_UNROLL_16 for (int b = 0; b < NB; ++b) kv[b] = _mm512_loadu_ps(k + size_t(b) * kKeyBlock * n + d * kKeyBlock);
    LARQL_UNROLL_16 for (int j = 0; j < NQ; ++j) {
      const __m512 qv = _mm512_set1_ps(q[j][d]);
      LARQL_UNROLL_16 for (int b = 0; b < NB; ++b) acc[j][b] = _mm512_fmadd_ps(qv, kv[b], acc[j][b]);
    }
  }
  LARQL_UNROLL_16 for (int j = 0; j < NQ; ++j)
    LARQL_UNROLL_16 for (int b = 0; b < NB; ++b) {
      const size_t p0 = (b0 + size_t(b)) * kKeyBlock;
      const __m512 scaled = _mm512_mul_ps(acc[j][b], scale);
      if (p0 >= first && p0 + kKeyBlock <= end) {
        _mm512_storeu_ps(out[j] + (p0 - first), scaled);
      } else {  // the first or the last block
        alignas(64) float lanes[kKeyBlock];
        _mm512_store_ps(lanes, scaled);
        store_positions(lanes, kKeyBlock, p0, first, end, out[j]);
      }
    }
}

// Queries [j0, j0 + NQ) against the blocks from first's to end's, NB at a time, then one at
// a time. Each ISA has its own copy of this loop and the next, so that the kernel inlines
// into it: one generic loop calling each ISA's kernel measured 3-7% slower scores.
template <int NQ>
LARQL_AVX512_TARGET("avx512f") void score_queries(StridedRows queries, size_t j0, const float* keys, size_t n, size_t first, size_t end,
                                                   float scale, float* out, size_t out_stride) {
  constexpr int NB = kScoreBlocks<NQ>;
  const __m512 s = _mm512_set1_ps(scale);
  const float* q[NQ];
  float* o[NQ];
  LARQL_UNROLL_16 for (int j = 0; j < NQ; ++j) q[j] = queries.row(j0 + size_t(j)), o[j] = out + (j0 + size_t(j)) * out_stride;
  size_t b = first / kKeyBlock;
  const size_t blocks_end = (end + kKeyBlock - 1) / kKeyBlock;
  for (; b + NB <= blocks_end; b += NB) score_blocks<NQ, NB>(q, keys, n, b, first, end, s, o);
  for (; b < blocks_end; ++b) score_blocks<NQ, 1>(q, keys, n, b, first, end, s, o);
}

void key_scores_avx512(StridedRows queries, const float* keys, size_t n, size_t first, size_t end, float scale, float* out,
                       size_t out_stride) {
  in_query_groups(queries.count,
                  [&]<int NQ>(size_t j) { score_queries<NQ>(queries, j, keys, n, first, end, scale, out, out_stride); });
}

// Weight rows [j0, j0 + NW) over the 64 outputs from i0 (fewer at the end of the row,
// masked): each value chunk is loaded once for all the rows; every sum in its own register.
template <int NW>
LARQL_AVX512_TARGET("avx512f") void weighted_block(StridedRows weights, size_t j0, StridedRows values, size_t i0, size_t n, float* out,
                                                    bool accumulate) {
  constexpr int NC = 4;
  __mmask16 present[NC];
  LARQL_UNROLL_16 for (int c = 0; c < NC; ++c) present[c] = present_lanes(i0 + 16 * size_t(c), n);
  const float* w[NW];
  LARQL_UNROLL_16 for (int j = 0; j < NW; ++j) w[j] = weights.row(j0 + size_t(j));
  __m512 o[NW][NC];
  LARQL_UNROLL_16 for (int j = 0; j < NW; ++j)
    LARQL_UNROLL_16 for (int c = 0; c < NC; ++c)
      o[j][c] = accumulate ? _mm512_maskz_loadu_ps(present[c], out + (j0 + size_t(j)) * n + i0 + 16 * size_t(c)) : _mm512_setzero_ps();
  for (size_t r = 0; r < values.count; ++r) {
    const float* v = values.row(r) + i0;
    __m512 vv[NC];
    LARQL_UNROLL_16 for (int c = 0; c < NC; ++c) vv[c] = _mm512_maskz_loadu_ps(present[c], v + 16 * c);
    LARQL_UNROLL_16 for (int j = 0; j < NW; ++j) {
      const __m512 wr = _mm512_set1_ps(w[j][r]);
      LARQL_UNROLL_16 for (int c = 0; c < NC; ++c) o[j][c] = _mm512_fmadd_ps(wr, vv[c], o[j][c]);
    }
  }
  LARQL_UNROLL_16 for (int j = 0; j < NW; ++j)
    LARQL_UNROLL_16 for (int c = 0; c < NC; ++c) _mm512_mask_storeu_ps(out + (j0 + size_t(j)) * n + i0 + 16 * size_t(c), present[c], o[j][c]);
}

void weighted_sum_avx512(StridedRows weights, StridedRows values, size_t n, float* out, bool accumulate) {
  in_query_groups(weights.count, [&]<int NW>(size_t j) {
    for (size_t i0 = 0; i0 < n; i0 += 64) weighted_block<NW>(weights, j, values, i0, n, out, accumulate);
  });
}

// score_blocks with eight-lane registers, two per block: eight accumulators in all (four
// queries of one block, two of two, one of four), within the sixteen registers.
template <int NQ>
inline constexpr int kScoreBlocksAvx2 = 4 / NQ;

template <int NQ, int NB>
__attribute__((target("avx2,fma"), always_inline)) inline void score_blocks_avx2(const float* const (&q)[NQ], const float* keys, size_t n,
                                                                                size_t b0, size_t first, size_t end, __m256 scale,
                                                                                float* const (&out)[NQ]) {
  __m256 acc[NQ][NB][2];
  LARQL_UNROLL_16 for (int j = 0; j < NQ; ++j)
    LARQL_UNROLL_16 for (int b = 0; b < NB; ++b) acc[j][b][0] = acc[j][b][1] = _mm256_setzero_ps();
  const float* k = keys + b0 * kKeyBlock * n;
  for (size_t d = 0; d < n; ++d) {
    __m256 kv[NB][2];
    LARQL_UNROLL_16 for (int b = 0; b < NB; ++b)
      LARQL_UNROLL_16 for (int h = 0; h < 2; ++h) kv[b][h] = _mm256_loadu_ps(k + size_t(b) * kKeyBlock * n + d * kKeyBlock + 8 * size_t(h));
    LARQL_UNROLL_16 for (int j = 0; j < NQ; ++j) {
      const __m256 qv = _mm256_set1_ps(q[j][d]);
      LARQL_UNROLL_16 for (int b = 0; b < NB; ++b)
        LARQL_UNROLL_16 for (int h = 0; h < 2; ++h) acc[j][b][h] = _mm256_fmadd_ps(qv, kv[b][h], acc[j][b][h]);
    }
  }
  LARQL_UNROLL_16 for (int j = 0; j < NQ; ++j)
    LARQL_UNROLL_16 for (int b = 0; b < NB; ++b) {
      alignas(32) float lanes[kKeyBlock];
      _mm256_store_ps(lanes, _mm256_mul_ps(acc[j][b][0], scale));
      _mm256_store_ps(lanes + 8, _mm256_mul_ps(acc[j][b][1], scale));
      store_positions(lanes, kKeyBlock, (b0 + size_t(b)) * kKeyBlock, first, end, out[j]);
    }
}

template <int NQ>
__attribute__((target("avx2,fma"))) void score_queries_avx2(StridedRows queries, size_t j0, const float* keys, size_t n, size_t first,
                                                            size_t end, float scale, float* out, size_t out_stride) {
  constexpr int NB = kScoreBlocksAvx2<NQ>;
  const __m256 s = _mm256_set1_ps(scale);
  const float* q[NQ];
  float* o[NQ];
  for (int j = 0; j < NQ; ++j) q[j] = queries.row(j0 + size_t(j)), o[j] = out + (j0 + size_t(j)) * out_stride;
  size_t b = first / kKeyBlock;
  const size_t blocks_end = (end + kKeyBlock - 1) / kKeyBlock;
  for (; b + NB <= blocks_end; b += NB) score_blocks_avx2<NQ, NB>(q, keys, n, b, first, end, s, o);
  for (; b < blocks_end; ++b) score_blocks_avx2<NQ, 1>(q, keys, n, b, first, end, s, o);
}

void key_scores_avx2(StridedRows queries, const float* keys, size_t n, size_t first, size_t end, float scale, float* out,
                     size_t out_stride) {
  in_query_groups(queries.count,
                  [&]<int NQ>(size_t j) { score_queries_avx2<NQ>(queries, j, keys, n, first, end, scale, out, out_stride); });
}

// The eight lanes [i, i + 8) of a row of n values that exist, as _mm256_maskload_ps takes them.
__attribute__((target("avx2"))) inline __m256i present_lanes8(size_t i, size_t n) {
  const size_t count = i >= n ? 0 : std::min<size_t>(8, n - i);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(int(count)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// weighted_block with eight-lane registers: NW ≤ 2 rows over 32 outputs (sixteen registers).
template <int NW>
__attribute__((target("avx2,fma"))) void weighted_block_avx2(StridedRows weights, size_t j0, StridedRows values, size_t i0, size_t n,
                                                         float* out, bool accumulate) {
  constexpr int NC = 4;
  __m256i present[NC];
  LARQL_UNROLL_16 for (int c = 0; c < NC; ++c) present[c] = present_lanes8(i0 + 8 * size_t(c), n);
  const float* w[NW];
  LARQL_UNROLL_16 for (int j = 0; j < NW; ++j) w[j] = weights.row(j0 + size_t(j));
  __m256 o[NW][NC];
  LARQL_UNROLL_16 for (int j = 0; j < NW; ++j)
    LARQL_UNROLL_16 for (int c = 0; c < NC; ++c)
      o[j][c] = accumulate ? _mm256_maskload_ps(out + (j0 + size_t(j)) * n + i0 + 8 * size_t(c), present[c]) : _mm256_setzero_ps();
  for (size_t r = 0; r < values.count; ++r) {
    const float* v = values.row(r) + i0;
    __m256 vv[NC];
    LARQL_UNROLL_16 for (int c = 0; c < NC; ++c) vv[c] = _mm256_maskload_ps(v + 8 * c, present[c]);
    LARQL_UNROLL_16 for (int j = 0; j < NW; ++j) {
      const __m256 wr = _mm256_set1_ps(w[j][r]);
      LARQL_UNROLL_16 for (int c = 0; c < NC; ++c) o[j][c] = _mm256_fmadd_ps(wr, vv[c], o[j][c]);
    }
  }
  LARQL_UNROLL_16 for (int j = 0; j < NW; ++j)
    LARQL_UNROLL_16 for (int c = 0; c < NC; ++c) _mm256_maskstore_ps(out + (j0 + size_t(j)) * n + i0 + 8 * size_t(c), present[c], o[j][c]);
}

void weighted_sum_avx2(StridedRows weights, StridedRows values, size_t n, float* out, bool accumulate) {
  for (size_t j = 0; j < weights.count;) {
    const bool pair = weights.count - j >= 2;
    for (size_t i0 = 0; i0 < n; i0 += 32) {
      if (pair) weighted_block_avx2<2>(weights, j, values, i0, n, out, accumulate);
      else weighted_block_avx2<1>(weights, j, values, i0, n, out, accumulate);
    }
    j += pair ? 2 : 1;
  }
}
#endif

}  // namespace

void key_scores_with(MatmulIsa isa, StridedRows queries, const float* keys, size_t n, size_t first, size_t end, float scale, float* out,
                     size_t out_stride) {
  if (first >= end) return;
#if defined(__x86_64__)
  if (isa >= MatmulIsa::avx512) return key_scores_avx512(queries, keys, n, first, end, scale, out, out_stride);
  if (isa == MatmulIsa::avx2) return key_scores_avx2(queries, keys, n, first, end, scale, out, out_stride);
#endif
  key_scores_scalar(queries, keys, n, first, end, scale, out, out_stride);
}

void key_scores(StridedRows queries, const float* keys, size_t n, size_t first, size_t end, float scale, float* out, size_t out_stride) {
  static const MatmulIsa isa = best_matmul_isa();
  key_scores_with(isa, queries, keys, n, first, end, scale, out, out_stride);
}

void weighted_sum_with(MatmulIsa isa, StridedRows weights, StridedRows values, size_t n, float* out, bool accumulate) {
  switch (isa) {
    case MatmulIsa::scalar: return weighted_sum_scalar(weights, values, n, out, accumulate);
#if defined(__x86_64__)
    case MatmulIsa::avx2: return weighted_sum_avx2(weights, values, n, out, accumulate);
    case MatmulIsa::avx512:
    case MatmulIsa::avx512bf16: return weighted_sum_avx512(weights, values, n, out, accumulate);
#else
    default: return weighted_sum_scalar(weights, values, n, out, accumulate);
#endif
  }
}

void weighted_sum(StridedRows weights, StridedRows values, size_t n, float* out, bool accumulate) {
  static const MatmulIsa isa = best_matmul_isa();
  weighted_sum_with(isa, weights, values, n, out, accumulate);
}

}  // namespace larql
