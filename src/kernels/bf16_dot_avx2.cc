// AVX2 emulation of bf16_dot.h's contract: the sixteen lanes as two ymm registers (lanes
// 0-7 from a chunk's first 16 values, 8-15 from the rest), two f32 FMAs per pair (odd
// element, then even) under MXCSR's flush-to-zero and denormals-are-zero. Decode holds
// both halves of an output; prefill one per pass (grid_tile).
#if defined(__x86_64__)

#include <immintrin.h>

#include <algorithm>
#include <array>

#include "kernels/bf16_dot.h"
#include "kernels/matvec_tiles.h"

#define LARQL_AVX2 __attribute__((target("avx2,fma")))

namespace larql {
namespace {

LARQL_AVX2 inline __m256 odd_half(__m256i v) { return _mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32(int(0xffff0000u)))); }
LARQL_AVX2 inline __m256 even_half(__m256i v) { return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16)); }

// The last, partial chunk of each row (values from 32 · full on), zero-padded; the
// activations already are.
template <int NR>
inline void pad_tails(const uint16_t* const* rows, size_t cols, size_t full, uint16_t (&tails)[NR][bf16dot::kChunk]) {
  for (int r = 0; r < NR; ++r)
    for (size_t k = bf16dot::kChunk * full; k < cols; ++k) tails[r][k - bf16dot::kChunk * full] = rows[r][k];
}

// Decode: nr ≤ 4 rows of one token, both halves of each output.
template <int NR>
LARQL_AVX2 void row_tile(const Tile& t) {
  const size_t cols = t.w->cols, full = cols / bf16dot::kChunk;
  const uint16_t* rows[NR];
  for (int r = 0; r < NR; ++r) rows[r] = reinterpret_cast<const uint16_t*>(t.w->row_ptr(t.r0 + r));
  const uint16_t* x = t.xb->chunk(t.t0, 0);
  const size_t step = t.xb->chunk_step(t.t0);
  __m256 acc[NR][2];
  for (int r = 0; r < NR; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  const size_t ahead = NR * t.w->row_bytes() / 2;
  // One chunk of 32 values: half h (16 values) feeds lanes 8h .. 8h+7.
  auto chunk = [&](size_t c, const uint16_t* const* w_rows) LARQL_AVX2 {
    for (int h = 0; h < 2; ++h) {
      const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + c * step + 16 * h));
      const __m256 xo = odd_half(xv), xe = even_half(xv);
      for (int r = 0; r < NR; ++r) {
        const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w_rows[r] + 16 * h));
        acc[r][h] = _mm256_fmadd_ps(odd_half(w), xo, acc[r][h]);
        acc[r][h] = _mm256_fmadd_ps(even_half(w), xe, acc[r][h]);
      }
    }
  };
  {
    const FlushSubnormals flush;  // the steps' ftz and daz; the reduction is plain f32
    for (size_t c = 0; c < full; ++c) {
      const uint16_t* w_rows[NR];
      for (int r = 0; r < NR; ++r) {
        _mm_prefetch(reinterpret_cast<const char*>(rows[r] + bf16dot::kChunk * c + ahead), _MM_HINT_T0);
        w_rows[r] = rows[r] + bf16dot::kChunk * c;
      }
      chunk(c, w_rows);
    }
    if (bf16dot::kChunk * full < cols) {
      alignas(32) uint16_t tails[NR][bf16dot::kChunk] = {};
      pad_tails<NR>(rows, cols, full, tails);
      const uint16_t* w_rows[NR];
      for (int r = 0; r < NR; ++r) w_rows[r] = tails[r];
      chunk(full, w_rows);
    }
  }
  for (int r = 0; r < NR; ++r) t.y[t.t0 * t.w->rows + t.r0 + r] = reduce16(acc[r][0], acc[r][1]);
}

// Prefill: up to kGridTokens tokens over nr ≤ 4 rows, two at a time, one half of the
// sixteen lanes per pass over a k-block (as the f32 tiles in matvec_avx2.cc): eight
// accumulators, the two tokens' odd and even activations and a row's odd and even
// weights fit the sixteen registers. Each lane still takes its chunks in order.
constexpr size_t kGroup = 2, kBlockChunks = 16;

template <int NR>
LARQL_AVX2 void grid_tile(const Tile& t) {
  const size_t cols = t.w->cols, full = cols / bf16dot::kChunk, chunks = bf16dot::padded(cols) / bf16dot::kChunk;
  const uint16_t* rows[NR];
  for (int r = 0; r < NR; ++r) rows[r] = reinterpret_cast<const uint16_t*>(t.w->row_ptr(t.r0 + r));
  alignas(32) uint16_t w_tail[NR][bf16dot::kChunk] = {};
  if (full < chunks) pad_tails<NR>(rows, cols, full, w_tail);
  PassSums<NR, kGroup> sums;
  SpreadPrefetch next_rows(t, full);  // over the first group's first passes
  // Half H of chunks [c0, c1) for tokens 2g .. 2g + NT - 1: values 32c + 16H .. + 15.
  auto pass = [&]<int NT, int H>(size_t g, size_t c0, size_t c1) LARQL_AVX2 {
    // A group of kGroup tokens lies in one of the activations' groups: one step for all.
    const uint16_t* xs[NT];
    for (int j = 0; j < NT; ++j) xs[j] = t.xb->chunk(t.t0 + kGroup * g + size_t(j), 0);
    const size_t step = t.xb->chunk_step(t.t0 + kGroup * g);
    __m256 acc[NR][NT];
    LARQL_UNROLL_TILE for (int r = 0; r < NR; ++r) LARQL_UNROLL_TILE for (int j = 0; j < NT; ++j) acc[r][j] = sums.lanes[g][H][r][j];
    auto accumulate = [&](const uint16_t* const* w, size_t kw, size_t kx) LARQL_AVX2 {
      __m256 xo[NT], xe[NT];
      LARQL_UNROLL_TILE for (int j = 0; j < NT; ++j) {
        const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xs[j] + kx));
        xo[j] = odd_half(x);
        xe[j] = even_half(x);
      }
      LARQL_UNROLL_TILE for (int r = 0; r < NR; ++r) {
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[r] + kw));
        const __m256 wo = odd_half(v), we = even_half(v);
        LARQL_UNROLL_TILE for (int j = 0; j < NT; ++j) {
          acc[r][j] = _mm256_fmadd_ps(wo, xo[j], acc[r][j]);
          acc[r][j] = _mm256_fmadd_ps(we, xe[j], acc[r][j]);
        }
      }
    };
    const size_t main_end = std::min(c1, full);
    for (size_t c = c0; c < main_end; ++c) {
      if (H == 0 && g == 0) next_rows.step();
      accumulate(rows, bf16dot::kChunk * c + 16 * H, step * c + 16 * H);
    }
    if (main_end < c1) {
      const uint16_t* w[NR];
      for (int r = 0; r < NR; ++r) w[r] = w_tail[r];
      accumulate(w, 16 * H, step * full + 16 * H);
    }
    LARQL_UNROLL_TILE for (int r = 0; r < NR; ++r) LARQL_UNROLL_TILE for (int j = 0; j < NT; ++j) sums.lanes[g][H][r][j] = acc[r][j];
  };
  {
    const FlushSubnormals flush;  // the steps' ftz and daz; the reduction is plain f32
    run_passes<kGroup>(chunks, kBlockChunks, t.nt, [](size_t, size_t) {}, pass);
  }
  sums.write(t);
}

// Eight activations rounded as bf16dot::round_activation does, each in its lane's low half.
LARQL_AVX2 inline __m256i round8(__m256 v) {
  const __m256i x = _mm256_castps_si256(v), high = _mm256_srli_epi32(x, 16);
  const __m256i nearest_even =
      _mm256_srli_epi32(_mm256_add_epi32(x, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), _mm256_and_si256(high, _mm256_set1_epi32(1)))), 16);
  const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, _mm256_set1_epi32(0x7fffffff)), _mm256_set1_epi32(0x7f800000));
  const __m256i tiny = _mm256_cmpeq_epi32(_mm256_and_si256(x, _mm256_set1_epi32(0x7f800000)), _mm256_setzero_si256());
  __m256i r = _mm256_blendv_epi8(nearest_even, _mm256_or_si256(high, _mm256_set1_epi32(0x40)), nan);
  return _mm256_blendv_epi8(r, _mm256_and_si256(high, _mm256_set1_epi32(0x8000)), tiny);
}

using TileFn = void (*)(const Tile&);

// Decode: 1-4 rows of one token; prefill: 1-4 rows of up to kGridTokens.
const std::array<TileFn, 4> kRowTiles{&row_tile<1>, &row_tile<2>, &row_tile<3>, &row_tile<4>};
const std::array<TileFn, 4> kGridTiles{&grid_tile<1>, &grid_tile<2>, &grid_tile<3>, &grid_tile<4>};

}  // namespace

LARQL_AVX2 void round_activation_chunk_avx2(const float* x, uint16_t* out) {
  for (int half = 0; half < 2; ++half) {
    const __m256i lo = round8(_mm256_loadu_ps(x + 16 * half)), hi = round8(_mm256_loadu_ps(x + 16 * half + 8));
    // packus interleaves the 128-bit lanes (lo 0-3, hi 0-3, lo 4-7, hi 4-7): put them back.
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(lo, hi), 0xd8);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 16 * half), packed);
  }
}

void bf16dot_tile_avx2(const Tile& t) { (t.nt == 1 ? kRowTiles : kGridTiles)[t.nr - 1](t); }

}  // namespace larql

#endif
