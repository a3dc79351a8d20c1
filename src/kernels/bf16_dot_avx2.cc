// AVX2 emulation of bf16_dot.h's contract: the sixteen lanes as two ymm registers (lanes
// 0-7 from a chunk's first 16 values, 8-15 from the rest), two f32 FMAs per pair (odd
// element, then even) under MXCSR's flush-to-zero and denormals-are-zero.
#if defined(__x86_64__)

#include <immintrin.h>

#include <array>

#include "kernels/bf16_dot.h"
#include "kernels/matvec_tiles.h"

#define LARQL_AVX2 __attribute__((target("avx2,fma")))

namespace larql {
namespace {

LARQL_AVX2 inline __m256 odd_half(__m256i v) { return _mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32(int(0xffff0000u)))); }
LARQL_AVX2 inline __m256 even_half(__m256i v) { return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16)); }

template <int NR, int NT>
LARQL_AVX2 void tile_fixed(const Tile& t) {
  const FlushSubnormals flush;
  const size_t cols = t.w->cols, full = cols / bf16dot::kChunk * bf16dot::kChunk, stride = bf16dot::padded(cols);
  const uint16_t* rows[NR];
  const uint16_t* xs[NT];
  for (int r = 0; r < NR; ++r) rows[r] = reinterpret_cast<const uint16_t*>(t.w->row_ptr(t.r0 + r));
  for (int j = 0; j < NT; ++j) xs[j] = t.xb + (t.t0 + j) * stride;
  __m256 acc[NR][NT][2];
  for (int r = 0; r < NR; ++r)
    for (int j = 0; j < NT; ++j) acc[r][j][0] = acc[r][j][1] = _mm256_setzero_ps();
  const size_t ahead = NR * t.w->row_bytes() / 2;
  // One chunk of 32 values: half h (16 values) feeds lanes 8h .. 8h+7.
  auto chunk = [&](size_t k, const uint16_t* const* w_rows) LARQL_AVX2 {
    for (int h = 0; h < 2; ++h) {
      __m256 xo[NT], xe[NT];
      for (int j = 0; j < NT; ++j) {
        const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xs[j] + k + 16 * h));
        xo[j] = odd_half(x);
        xe[j] = even_half(x);
      }
      for (int r = 0; r < NR; ++r) {
        const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w_rows[r] + 16 * h));
        const __m256 wo = odd_half(w), we = even_half(w);
        for (int j = 0; j < NT; ++j) {
          acc[r][j][h] = _mm256_fmadd_ps(wo, xo[j], acc[r][j][h]);
          acc[r][j][h] = _mm256_fmadd_ps(we, xe[j], acc[r][j][h]);
        }
      }
    }
  };
  for (size_t k = 0; k < full; k += bf16dot::kChunk) {
    const uint16_t* w_rows[NR];
    for (int r = 0; r < NR; ++r) {
      if (NT == 1) _mm_prefetch(reinterpret_cast<const char*>(rows[r] + k + ahead), _MM_HINT_T0);
      w_rows[r] = rows[r] + k;
    }
    chunk(k, w_rows);
  }
  if (full < cols) {  // the tail: weights zero-padded here, activations already padded
    alignas(32) uint16_t padded[NR][bf16dot::kChunk] = {};
    const uint16_t* w_rows[NR];
    for (int r = 0; r < NR; ++r) {
      for (size_t k = full; k < cols; ++k) padded[r][k - full] = rows[r][k];
      w_rows[r] = padded[r];
    }
    chunk(full, w_rows);
  }
  for (int r = 0; r < NR; ++r)
    for (int j = 0; j < NT; ++j) t.y[(t.t0 + j) * t.w->rows + t.r0 + r] = reduce16(acc[r][j][0], acc[r][j][1]);
}

using TileFn = void (*)(const Tile&);

// Shapes: (1..4 rows) × 1 token, and (1..2 rows) × 2 tokens, as the f32 AVX2 tiles.
const std::array<TileFn, 6> kTiles{&tile_fixed<1, 1>, &tile_fixed<2, 1>, &tile_fixed<3, 1>,
                                   &tile_fixed<4, 1>, &tile_fixed<1, 2>, &tile_fixed<2, 2>};

}  // namespace

void bf16dot_tile_avx2(const Tile& t) { kTiles[t.nt == 1 ? t.nr - 1 : 4 + (t.nr - 1)](t); }

}  // namespace larql

#endif
