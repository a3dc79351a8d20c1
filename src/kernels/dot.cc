#include "kernels/dot.h"

#include <algorithm>
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

void weighted_sum_scalar(StridedRows weights, StridedRows values, size_t n, float* out) {
  for (size_t j = 0; j < weights.count; ++j, out += n) {
    const float* w = weights.row(j);
    std::memset(out, 0, n * sizeof(float));
    for (size_t r = 0; r < values.count; ++r)
      for (size_t i = 0; i < n; ++i) out[i] += w[r] * values.row(r)[i];
  }
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

// The sixteen lanes [i, i + 16) of a row of n values that exist.
inline __mmask16 present_lanes(size_t i, size_t n) {
  return i >= n ? __mmask16(0) : n - i >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - i)) - 1);
}

LARQL_AVX512_TARGET("avx512f") float dot_avx512(const float* a, const float* b, size_t n) {
  __m512 acc = _mm512_setzero_ps();
  size_t k = 0;
  for (; k + 16 <= n; k += 16) acc = _mm512_fmadd_ps(_mm512_loadu_ps(a + k), _mm512_loadu_ps(b + k), acc);
  if (k < n) {
    const __mmask16 present = present_lanes(k, n);
    acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(present, a + k), _mm512_maskz_loadu_ps(present, b + k), acc);
  }
  return reduce16(acc);
}

// reduce16 of N = 8 or 16 vectors at once: lane i < N of the result is reduce16(v[i]) bit
// for bit. The same tree, each step adding lanes of two vectors gathered side by side (a + b
// is b + a exactly); the last step gathers them back into the order of v.
LARQL_AVX512_TARGET("avx512f") inline __m512 add_gathered(__m512 x, __m512 y, __m512i first, __m512i second) {
  return _mm512_add_ps(_mm512_permutex2var_ps(x, first, y), _mm512_permutex2var_ps(x, second, y));
}

// Inlined with its loops unrolled, so that v stays in registers.
template <int N>
LARQL_AVX512_TARGET("avx512f") __attribute__((always_inline)) inline __m512 reduce16_each(const __m512 (&v)[N]) {
  static_assert(N == 8 || N == 16);
  // Lanes of (x, y) as add_gathered's permutes number them: x's 0-15, then y's 16-31.
  // l[i] + l[i+8] of two vectors: [a of x | a of y]
  const __m512i halves_lo = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
  const __m512i halves_hi = _mm512_add_epi32(halves_lo, _mm512_set1_epi32(8));
  // + (i+4) of four: quarter m holds b of vector m
  const __m512i quarters_lo = _mm512_setr_epi32(0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27);
  const __m512i quarters_hi = _mm512_add_epi32(quarters_lo, _mm512_set1_epi32(4));
  // + (i+2) of eight: quarter m holds c of vectors m and 4 + m
  const __m512i pairs_lo = _mm512_setr_epi32(0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29);
  const __m512i pairs_hi = _mm512_add_epi32(pairs_lo, _mm512_set1_epi32(2));
  // + (i+1) of sixteen, in order: c of vector i is at 16·(i / 8) + 4·(i % 4) + 2·(i % 8 / 4)
  const __m512i last_lo = _mm512_setr_epi32(0, 4, 8, 12, 2, 6, 10, 14, 16, 20, 24, 28, 18, 22, 26, 30);
  const __m512i last_hi = _mm512_add_epi32(last_lo, _mm512_set1_epi32(1));
  __m512 a[N / 2], b[N / 4], c[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};  // c[1] unused with 8
  LARQL_UNROLL_16 for (int p = 0; p < N / 2; ++p) a[p] = add_gathered(v[2 * p], v[2 * p + 1], halves_lo, halves_hi);
  LARQL_UNROLL_16 for (int p = 0; p < N / 4; ++p) b[p] = add_gathered(a[2 * p], a[2 * p + 1], quarters_lo, quarters_hi);
  LARQL_UNROLL_16 for (int p = 0; p < N / 8; ++p) c[p] = add_gathered(b[2 * p], b[2 * p + 1], pairs_lo, pairs_hi);
  return add_gathered(c[0], c[1], last_lo, last_hi);
}

// A block of dots_avx512: NQ queries times NK keys, each in one accumulator. One query takes
// eight keys: sixteen would need more key pointers than there are registers.
template <int NQ>
inline constexpr int kBlockKeys = NQ == 1 ? 8 : 16 / NQ;

// Sixteen values from i of NQ queries times kBlockKeys keys, into acc[query · NK + key].
template <int NQ, int NK = kBlockKeys<NQ>>
LARQL_AVX512_TARGET("avx512f") __attribute__((always_inline)) inline void dots_chunk(__m512 (&acc)[NQ * NK], const float* const (&q)[NQ],
                                                                                    const float* const (&k)[NK], size_t i,
                                                                                    __mmask16 present) {
  __m512 qv[NQ];
  LARQL_UNROLL_16 for (int j = 0; j < NQ; ++j) qv[j] = _mm512_maskz_loadu_ps(present, q[j] + i);
  LARQL_UNROLL_16 for (int r = 0; r < NK; ++r) {
    const __m512 kv = _mm512_maskz_loadu_ps(present, k[r] + i);
    LARQL_UNROLL_16 for (int j = 0; j < NQ; ++j) acc[j * NK + r] = _mm512_fmadd_ps(qv[j], kv, acc[j * NK + r]);
  }
}

// Queries [j0, j0 + NQ) against the kBlockKeys keys from r0: each chunk of a key is loaded
// once for all the queries. Keys past the last repeat it and are not written. A partial last
// chunk adds fma(0, 0, lane), as dot()'s zero padding does.
template <int NQ>
LARQL_AVX512_TARGET("avx512f") __attribute__((always_inline)) inline void dots_block(StridedRows queries, size_t j0, StridedRows keys,
                                                                                    size_t r0, size_t n, float* out, size_t out_stride) {
  constexpr int NK = kBlockKeys<NQ>;
  const float* q[NQ];
  const float* k[NK];
  LARQL_UNROLL_16 for (int j = 0; j < NQ; ++j) q[j] = queries.row(j0 + size_t(j));
  LARQL_UNROLL_16 for (int r = 0; r < NK; ++r) k[r] = keys.row(std::min(r0 + size_t(r), keys.count - 1));
  __m512 acc[NQ * NK];
  LARQL_UNROLL_16 for (__m512& a : acc) a = _mm512_setzero_ps();
  size_t i = 0;
  for (; i + 16 <= n; i += 16) dots_chunk<NQ>(acc, q, k, i, 0xffff);
  if (i < n) dots_chunk<NQ>(acc, q, k, i, present_lanes(i, n));
  const __m512 scores = reduce16_each(acc);
  const __mmask16 written = keys.count - r0 >= size_t(NK) ? __mmask16((1u << NK) - 1) : __mmask16((1u << (keys.count - r0)) - 1);
  const __m512i lanes = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  LARQL_UNROLL_16 for (int j = 0; j < NQ; ++j) {  // query j's scores moved to the first lanes
    const __m512 mine = j == 0 ? scores : _mm512_permutex2var_ps(scores, _mm512_add_epi32(lanes, _mm512_set1_epi32(j * NK)), scores);
    _mm512_mask_storeu_ps(out + (j0 + size_t(j)) * out_stride + r0, written, mine);
  }
}

// Queries [j0, j0 + NQ) against every key.
template <int NQ>
LARQL_AVX512_TARGET("avx512f") void dots_queries(StridedRows queries, size_t j0, StridedRows keys, size_t n, float* out, size_t out_stride) {
  for (size_t r0 = 0; r0 < keys.count; r0 += kBlockKeys<NQ>) dots_block<NQ>(queries, j0, keys, r0, n, out, out_stride);
}

void dots_avx512(StridedRows queries, StridedRows keys, size_t n, float* out, size_t out_stride) {
  for (size_t j = 0; j < queries.count;) {
    const size_t left = queries.count - j;
    const int taken = left >= 4 ? 4 : left >= 2 ? 2 : 1;
    if (taken == 4) dots_queries<4>(queries, j, keys, n, out, out_stride);
    else if (taken == 2) dots_queries<2>(queries, j, keys, n, out, out_stride);
    else dots_queries<1>(queries, j, keys, n, out, out_stride);
    j += size_t(taken);
  }
}

// Weight rows [j0, j0 + NW) over the 64 outputs from i0 (fewer at the end of the row,
// masked): each value chunk is loaded once for all the rows; every sum in its own register.
template <int NW>
LARQL_AVX512_TARGET("avx512f") void weighted_block(StridedRows weights, size_t j0, StridedRows values, size_t i0, size_t n, float* out) {
  constexpr int NC = 4;
  __mmask16 present[NC];
  LARQL_UNROLL_16 for (int c = 0; c < NC; ++c) present[c] = present_lanes(i0 + 16 * size_t(c), n);
  const float* w[NW];
  LARQL_UNROLL_16 for (int j = 0; j < NW; ++j) w[j] = weights.row(j0 + size_t(j));
  __m512 o[NW][NC];
  LARQL_UNROLL_16 for (int j = 0; j < NW; ++j)
    LARQL_UNROLL_16 for (int c = 0; c < NC; ++c) o[j][c] = _mm512_setzero_ps();
  for (size_t r = 0; r < values.count; ++r) {
    const float* v = values.row(r) + i0;
    __m512 vv[NC];
    LARQL_UNROLL_16 for (int c = 0; c < NC; ++c) vv[c] = _mm512_maskz_loadu_ps(present[c], v + 16 * c);
    LARQL_UNROLL_16 for (int j = 0; j < NW; ++j) {
      const __m512 wr = _mm512_set1_ps(w[j][r]);
      LARQL_UNROLL_16 for (int c = 0; c < NC; ++c) o[j][c] = _mm512_add_ps(o[j][c], _mm512_mul_ps(wr, vv[c]));
    }
  }
  LARQL_UNROLL_16 for (int j = 0; j < NW; ++j)
    LARQL_UNROLL_16 for (int c = 0; c < NC; ++c) _mm512_mask_storeu_ps(out + (j0 + size_t(j)) * n + i0 + 16 * size_t(c), present[c], o[j][c]);
}

void weighted_sum_avx512(StridedRows weights, StridedRows values, size_t n, float* out) {
  for (size_t j = 0; j < weights.count;) {
    const size_t left = weights.count - j;
    const int taken = left >= 4 ? 4 : left >= 2 ? 2 : 1;
    for (size_t i0 = 0; i0 < n; i0 += 64) {
      if (taken == 4) weighted_block<4>(weights, j, values, i0, n, out);
      else if (taken == 2) weighted_block<2>(weights, j, values, i0, n, out);
      else weighted_block<1>(weights, j, values, i0, n, out);
    }
    j += size_t(taken);
  }
}

// reduce16 of four (lo, hi) lane pairs at once: out[j] = reduce16(lo[j], hi[j]) bit for bit,
// the same tree on lanes gathered side by side.
__attribute__((target("avx2"))) inline void reduce16_four(const __m256 (&lo)[4], const __m256 (&hi)[4], float* out) {
  __m256 a[4];
  for (int j = 0; j < 4; ++j) a[j] = _mm256_add_ps(lo[j], hi[j]);  // l[i] + l[i+8]
  // + (i+4): [b0 | b1] and [b2 | b3]
  const __m256 b01 = _mm256_add_ps(_mm256_permute2f128_ps(a[0], a[1], 0x20), _mm256_permute2f128_ps(a[0], a[1], 0x31));
  const __m256 b23 = _mm256_add_ps(_mm256_permute2f128_ps(a[2], a[3], 0x20), _mm256_permute2f128_ps(a[2], a[3], 0x31));
  // + (i+2): [c0, c2 | c1, c3]
  const __m256d x = _mm256_castps_pd(b01), y = _mm256_castps_pd(b23);
  const __m256 c = _mm256_add_ps(_mm256_castpd_ps(_mm256_unpacklo_pd(x, y)), _mm256_castpd_ps(_mm256_unpackhi_pd(x, y)));
  // + (i+1): [r0, r2, r0, r2 | r1, r3, r1, r3]
  const __m256 r = _mm256_add_ps(_mm256_shuffle_ps(c, c, _MM_SHUFFLE(2, 0, 2, 0)), _mm256_shuffle_ps(c, c, _MM_SHUFFLE(3, 1, 3, 1)));
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, r);
  out[0] = lanes[0], out[1] = lanes[4], out[2] = lanes[1], out[3] = lanes[5];
}

// Queries [j0, j0 + 4) against every key, dot_avx2's lanes and zero-padded tail: each chunk
// of a key is loaded once for the four.
__attribute__((target("avx2,fma"))) void dots_four_avx2(StridedRows queries, size_t j0, StridedRows keys, size_t n, float* out,
                                                        size_t out_stride) {
  const size_t main = n / 16 * 16;
  const float* q[4];
  alignas(32) float q_tail[4][16] = {};
  for (int j = 0; j < 4; ++j) {
    q[j] = queries.row(j0 + size_t(j));
    std::copy(q[j] + main, q[j] + n, q_tail[j]);
  }
  for (size_t r = 0; r < keys.count; ++r) {
    const float* k = keys.row(r);
    __m256 lo[4], hi[4];
    for (int j = 0; j < 4; ++j) lo[j] = hi[j] = _mm256_setzero_ps();
    for (size_t i = 0; i < main; i += 16) {
      const __m256 k_lo = _mm256_loadu_ps(k + i), k_hi = _mm256_loadu_ps(k + i + 8);
      for (int j = 0; j < 4; ++j) {
        lo[j] = _mm256_fmadd_ps(_mm256_loadu_ps(q[j] + i), k_lo, lo[j]);
        hi[j] = _mm256_fmadd_ps(_mm256_loadu_ps(q[j] + i + 8), k_hi, hi[j]);
      }
    }
    if (main < n) {
      alignas(32) float k_tail[16] = {};
      std::copy(k + main, k + n, k_tail);
      const __m256 k_lo = _mm256_load_ps(k_tail), k_hi = _mm256_load_ps(k_tail + 8);
      for (int j = 0; j < 4; ++j) {
        lo[j] = _mm256_fmadd_ps(_mm256_load_ps(q_tail[j]), k_lo, lo[j]);
        hi[j] = _mm256_fmadd_ps(_mm256_load_ps(q_tail[j] + 8), k_hi, hi[j]);
      }
    }
    float scores[4];
    reduce16_four(lo, hi, scores);
    for (int j = 0; j < 4; ++j) out[(j0 + size_t(j)) * out_stride + r] = scores[j];
  }
}

void dots_avx2(StridedRows queries, StridedRows keys, size_t n, float* out, size_t out_stride) {
  size_t j = 0;
  for (; j + 4 <= queries.count; j += 4) dots_four_avx2(queries, j, keys, n, out, out_stride);
  for (; j < queries.count; ++j)
    for (size_t r = 0; r < keys.count; ++r) out[j * out_stride + r] = dot_avx2(queries.row(j), keys.row(r), n);
}

// The eight lanes [i, i + 8) of a row of n values that exist, as _mm256_maskload_ps takes them.
__attribute__((target("avx2"))) inline __m256i present_lanes8(size_t i, size_t n) {
  const size_t count = i >= n ? 0 : std::min<size_t>(8, n - i);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(int(count)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// weighted_block with eight-lane registers: NW ≤ 2 rows over 32 outputs (sixteen registers).
template <int NW>
__attribute__((target("avx2"))) void weighted_block_avx2(StridedRows weights, size_t j0, StridedRows values, size_t i0, size_t n,
                                                         float* out) {
  constexpr int NC = 4;
  __m256i present[NC];
  LARQL_UNROLL_16 for (int c = 0; c < NC; ++c) present[c] = present_lanes8(i0 + 8 * size_t(c), n);
  const float* w[NW];
  LARQL_UNROLL_16 for (int j = 0; j < NW; ++j) w[j] = weights.row(j0 + size_t(j));
  __m256 o[NW][NC];
  LARQL_UNROLL_16 for (int j = 0; j < NW; ++j)
    LARQL_UNROLL_16 for (int c = 0; c < NC; ++c) o[j][c] = _mm256_setzero_ps();
  for (size_t r = 0; r < values.count; ++r) {
    const float* v = values.row(r) + i0;
    __m256 vv[NC];
    LARQL_UNROLL_16 for (int c = 0; c < NC; ++c) vv[c] = _mm256_maskload_ps(v + 8 * c, present[c]);
    LARQL_UNROLL_16 for (int j = 0; j < NW; ++j) {
      const __m256 wr = _mm256_set1_ps(w[j][r]);
      LARQL_UNROLL_16 for (int c = 0; c < NC; ++c) o[j][c] = _mm256_add_ps(o[j][c], _mm256_mul_ps(wr, vv[c]));
    }
  }
  LARQL_UNROLL_16 for (int j = 0; j < NW; ++j)
    LARQL_UNROLL_16 for (int c = 0; c < NC; ++c) _mm256_maskstore_ps(out + (j0 + size_t(j)) * n + i0 + 8 * size_t(c), present[c], o[j][c]);
}

void weighted_sum_avx2(StridedRows weights, StridedRows values, size_t n, float* out) {
  for (size_t j = 0; j < weights.count;) {
    const bool pair = weights.count - j >= 2;
    for (size_t i0 = 0; i0 < n; i0 += 32) {
      if (pair) weighted_block_avx2<2>(weights, j, values, i0, n, out);
      else weighted_block_avx2<1>(weights, j, values, i0, n, out);
    }
    j += pair ? 2 : 1;
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

void dots_with(MatmulIsa isa, StridedRows queries, StridedRows keys, size_t n, float* out, size_t out_stride) {
#if defined(__x86_64__)
  if (isa >= MatmulIsa::avx512) return dots_avx512(queries, keys, n, out, out_stride);
  if (isa == MatmulIsa::avx2) return dots_avx2(queries, keys, n, out, out_stride);
#endif
  for (size_t j = 0; j < queries.count; ++j)
    for (size_t r = 0; r < keys.count; ++r) out[j * out_stride + r] = dot_with(isa, queries.row(j), keys.row(r), n);
}

void dots(StridedRows queries, StridedRows keys, size_t n, float* out, size_t out_stride) {
  static const MatmulIsa isa = best_matmul_isa();
  dots_with(isa, queries, keys, n, out, out_stride);
}

void weighted_sum_with(MatmulIsa isa, StridedRows weights, StridedRows values, size_t n, float* out) {
  switch (isa) {
    case MatmulIsa::scalar: return weighted_sum_scalar(weights, values, n, out);
#if defined(__x86_64__)
    case MatmulIsa::avx2: return weighted_sum_avx2(weights, values, n, out);
    case MatmulIsa::avx512:
    case MatmulIsa::avx512bf16: return weighted_sum_avx512(weights, values, n, out);
#else
    default: return weighted_sum_scalar(weights, values, n, out);
#endif
  }
}

void weighted_sum(StridedRows weights, StridedRows values, size_t n, float* out) {
  static const MatmulIsa isa = best_matmul_isa();
  weighted_sum_with(isa, weights, values, n, out);
}

}  // namespace larql
