// AVX2 tiles: the sixteen lanes of the contract in matvec.h as two ymm registers (lanes
// 0-7 and 8-15), so results equal the AVX-512 and scalar versions bit for bit.
#if defined(__x86_64__)

#include <immintrin.h>

#include <array>

#include "kernels/matvec_tiles.h"

#define LARQL_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace larql {
namespace {

template <DType T>
LARQL_AVX2 inline __m256 load8(const uint8_t* row, size_t k) {
  if constexpr (T == DType::f32) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + k);
  } else {
    const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(reinterpret_cast<const uint16_t*>(row) + k));
    if constexpr (T == DType::bf16)
      return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(raw), 16));
    else
      return _mm256_cvtph_ps(raw);
  }
}

template <DType T, int NR, int NT>
LARQL_AVX2 void tile_fixed(const Tile& t) {
  const size_t n = t.w->cols, main = n / 16 * 16;
  const uint8_t* rows[NR];
  const float* xs[NT];
  for (int r = 0; r < NR; ++r) rows[r] = t.w->row_ptr(t.r0 + r);
  for (int j = 0; j < NT; ++j) xs[j] = t.x + (t.t0 + j) * n;
  __m256 lo[NR][NT], hi[NR][NT];
  for (int r = 0; r < NR; ++r)
    for (int j = 0; j < NT; ++j) lo[r][j] = hi[r][j] = _mm256_setzero_ps();
  // Each row prefetches its bytes in the next tile's rows, one line per 64 bytes.
  constexpr size_t kValueBytes = T == DType::f32 ? 4 : 2;
  const size_t ahead = NR * t.w->row_bytes();
  for (size_t k = 0; k < main; k += 16) {
    if (t.prefetch_next_rows && (k * kValueBytes) % 64 == 0)
      for (int r = 0; r < NR; ++r) _mm_prefetch(reinterpret_cast<const char*>(rows[r] + k * kValueBytes + ahead), _MM_HINT_T0);
    __m256 xl[NT], xh[NT];
    for (int j = 0; j < NT; ++j) {
      xl[j] = _mm256_loadu_ps(xs[j] + k);
      xh[j] = _mm256_loadu_ps(xs[j] + k + 8);
    }
    for (int r = 0; r < NR; ++r) {
      const __m256 wl = load8<T>(rows[r], k), wh = load8<T>(rows[r], k + 8);
      for (int j = 0; j < NT; ++j) {
        lo[r][j] = _mm256_fmadd_ps(wl, xl[j], lo[r][j]);
        hi[r][j] = _mm256_fmadd_ps(wh, xh[j], hi[r][j]);
      }
    }
  }
  if (main < n) {  // the tail, zero-padded to sixteen lanes
    alignas(32) float xp[NT][16] = {};
    for (int j = 0; j < NT; ++j)
      for (size_t k = main; k < n; ++k) xp[j][k - main] = xs[j][k];
    for (int r = 0; r < NR; ++r) {
      alignas(32) float wp[16] = {};
      for (size_t k = main; k < n; ++k) wp[k - main] = load_as_f32(T, rows[r], k);
      const __m256 wl = _mm256_load_ps(wp), wh = _mm256_load_ps(wp + 8);
      for (int j = 0; j < NT; ++j) {
        lo[r][j] = _mm256_fmadd_ps(wl, _mm256_load_ps(xp[j]), lo[r][j]);
        hi[r][j] = _mm256_fmadd_ps(wh, _mm256_load_ps(xp[j] + 8), hi[r][j]);
      }
    }
  }
  for (int r = 0; r < NR; ++r)
    for (int j = 0; j < NT; ++j) t.y[(t.t0 + j) * t.w->rows + t.r0 + r] = reduce16(lo[r][j], hi[r][j]);
}

using TileFn = void (*)(const Tile&);

// Shapes: (1..4 rows) × 1 token, and (1..2 rows) × 2 tokens.
template <DType T>
const std::array<TileFn, 6> kTiles{&tile_fixed<T, 1, 1>, &tile_fixed<T, 2, 1>, &tile_fixed<T, 3, 1>,
                                   &tile_fixed<T, 4, 1>, &tile_fixed<T, 1, 2>, &tile_fixed<T, 2, 2>};

}  // namespace

void tile_avx2(const Tile& t) {
  const size_t i = t.nt == 1 ? t.nr - 1 : 4 + (t.nr - 1);
  switch (t.w->dtype) {
    case DType::f32: return kTiles<DType::f32>[i](t);
    case DType::f16: return kTiles<DType::f16>[i](t);
    case DType::bf16: return kTiles<DType::bf16>[i](t);
    case DType::q8_0:
    case DType::q4_0:
    case DType::q4_1:
    case DType::q5_0:
    case DType::q5_1:
    case DType::q4_k:
    case DType::q5_k:
    case DType::q6_k: break;  // block formats have their own tiles (block_dot.h)
  }
}

}  // namespace larql

#endif
