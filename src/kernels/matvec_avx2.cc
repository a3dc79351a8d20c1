// AVX2 tiles: the sixteen lanes of the contract in matvec.h as two ymm registers (lanes
// 0-7 and 8-15), so results equal the AVX-512 and scalar versions bit for bit.
//
// Decode (one token) holds both halves of each output. Prefill holds one: four rows ×
// three tokens run over a block of k twice, once per half of the sixteen lanes, twelve
// accumulators and four operands in the sixteen registers (both halves would leave room
// for four outputs, whose loads and conversions the two FMA ports then wait for). Each
// lane still takes its elements in order of k, so the result is the contract's.
#if defined(__x86_64__)

#include <immintrin.h>

#include <algorithm>
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

// Decode: nr ≤ 4 rows of one token, both halves of each output.
template <DType T, int NR>
LARQL_AVX2 void row_tile(const Tile& t) {
  const size_t n = t.w->cols, main = n / 16 * 16;
  const uint8_t* rows[NR];
  for (int r = 0; r < NR; ++r) rows[r] = t.w->row_ptr(t.r0 + r);
  const float* x = t.x + t.t0 * n;
  __m256 lo[NR], hi[NR];
  for (int r = 0; r < NR; ++r) lo[r] = hi[r] = _mm256_setzero_ps();
  // Each row prefetches its bytes in the next tile's rows, one line per 64 bytes.
  constexpr size_t kValueBytes = T == DType::f32 ? 4 : 2;
  const size_t ahead = NR * t.w->row_bytes();
  for (size_t k = 0; k < main; k += 16) {
    if ((k * kValueBytes) % 64 == 0)
      for (int r = 0; r < NR; ++r) _mm_prefetch(reinterpret_cast<const char*>(rows[r] + k * kValueBytes + ahead), _MM_HINT_T0);
    const __m256 xl = _mm256_loadu_ps(x + k), xh = _mm256_loadu_ps(x + k + 8);
    for (int r = 0; r < NR; ++r) {
      lo[r] = _mm256_fmadd_ps(load8<T>(rows[r], k), xl, lo[r]);
      hi[r] = _mm256_fmadd_ps(load8<T>(rows[r], k + 8), xh, hi[r]);
    }
  }
  if (main < n) {  // the tail, zero-padded to sixteen lanes
    alignas(32) float xp[16] = {};
    for (size_t k = main; k < n; ++k) xp[k - main] = x[k];
    for (int r = 0; r < NR; ++r) {
      alignas(32) float wp[16] = {};
      for (size_t k = main; k < n; ++k) wp[k - main] = load_as_f32(T, rows[r], k);
      lo[r] = _mm256_fmadd_ps(_mm256_load_ps(wp), _mm256_load_ps(xp), lo[r]);
      hi[r] = _mm256_fmadd_ps(_mm256_load_ps(wp + 8), _mm256_load_ps(xp + 8), hi[r]);
    }
  }
  for (int r = 0; r < NR; ++r) t.y[t.t0 * t.w->rows + t.r0 + r] = reduce16(lo[r], hi[r]);
}

// Prefill tiles take up to kGridTokens tokens over nr ≤ 4 rows, three at a time (twelve
// accumulators), with the k-block loop outside the tokens' loop: a block of the rows
// (4 × 512 × 2 bytes of bf16) stays in L1 for all of them and for both halves' passes,
// and only the activations stream from L2. Each group of three keeps its sums between
// blocks in `sums`.
constexpr size_t kBlockChunks = 32, kGroup = 3;

template <DType T, int NR>
LARQL_AVX2 void grid_tile(const Tile& t) {
  const size_t n = t.w->cols, chunks = (n + 15) / 16, full = n / 16;
  const uint8_t* rows[NR];
  for (int r = 0; r < NR; ++r) rows[r] = t.w->row_ptr(t.r0 + r);
  const float* x0 = t.x + t.t0 * n;
  // The last, partial chunk of each row and token, zero-padded.
  alignas(32) uint8_t w_tail[NR][64] = {};
  alignas(32) float x_tail[kGridTokens][16];
  if (full < chunks) {
    for (int r = 0; r < NR; ++r) std::copy(rows[r] + dtype_bytes(T, 16 * full), rows[r] + t.w->row_bytes(), w_tail[r]);
    for (size_t j = 0; j < t.nt; ++j) {
      std::fill(x_tail[j], x_tail[j] + 16, 0.0f);
      std::copy(x0 + j * n + 16 * full, x0 + (j + 1) * n, x_tail[j]);
    }
  }
  PassSums<NR, kGroup> sums;
  SpreadPrefetch next_rows(t, full);  // over the first group's first passes
  // Half H of chunks [c0, c1) for tokens 3g .. 3g + NT - 1: values 16c + 8H .. 16c + 8H + 7.
  auto pass = [&]<int NT, int H>(size_t g, size_t c0, size_t c1) LARQL_AVX2 {
    const float* xs[NT];
    for (int j = 0; j < NT; ++j) xs[j] = x0 + (kGroup * g + size_t(j)) * n;
    __m256 acc[NR][NT];
    LARQL_UNROLL_TILE for (int r = 0; r < NR; ++r) LARQL_UNROLL_TILE for (int j = 0; j < NT; ++j) acc[r][j] = sums.lanes[g][H][r][j];
    auto step = [&](const uint8_t* const* w, const float* const* x, size_t k) LARQL_AVX2 {
      __m256 xv[NT];
      LARQL_UNROLL_TILE for (int j = 0; j < NT; ++j) xv[j] = _mm256_loadu_ps(x[j] + k);
      LARQL_UNROLL_TILE for (int r = 0; r < NR; ++r) {
        const __m256 v = load8<T>(w[r], k);
        LARQL_UNROLL_TILE for (int j = 0; j < NT; ++j) acc[r][j] = _mm256_fmadd_ps(v, xv[j], acc[r][j]);
      }
    };
    const size_t main_end = std::min(c1, full);
    for (size_t c = c0; c < main_end; ++c) {
      if (H == 0 && g == 0) next_rows.step();
      step(rows, xs, 16 * c + 8 * H);
    }
    if (main_end < c1) {
      const uint8_t* w[NR];
      const float* x[NT];
      for (int r = 0; r < NR; ++r) w[r] = w_tail[r];
      for (int j = 0; j < NT; ++j) x[j] = x_tail[kGroup * g + size_t(j)];
      step(w, x, 8 * H);
    }
    LARQL_UNROLL_TILE for (int r = 0; r < NR; ++r) LARQL_UNROLL_TILE for (int j = 0; j < NT; ++j) sums.lanes[g][H][r][j] = acc[r][j];
  };
  run_passes<kGroup>(chunks, kBlockChunks, t.nt, [](size_t, size_t) {}, pass);
  sums.write(t);
}

using TileFn = void (*)(const Tile&);

template <DType T>
const std::array<TileFn, 4> kRowTiles{&row_tile<T, 1>, &row_tile<T, 2>, &row_tile<T, 3>, &row_tile<T, 4>};

template <DType T>
const std::array<TileFn, 4> kGridTiles{&grid_tile<T, 1>, &grid_tile<T, 2>, &grid_tile<T, 3>, &grid_tile<T, 4>};

template <DType T>
void dispatch(const Tile& t) {
  if (t.nt == 1) kRowTiles<T>[t.nr - 1](t);
  else kGridTiles<T>[t.nr - 1](t);
}

}  // namespace

void tile_avx2(const Tile& t) {
  switch (t.w->dtype) {
    case DType::f32: return dispatch<DType::f32>(t);
    case DType::f16: return dispatch<DType::f16>(t);
    case DType::bf16: return dispatch<DType::bf16>(t);
    case DType::q8_0:
    case DType::q4_0:
    case DType::q4_1:
    case DType::q5_0:
    case DType::q5_1:
    case DType::q4_k:
    case DType::q5_k:
    case DType::q6_k:
    case DType::mxfp4: break;  // block formats have their own tiles (block_dot.h)
  }
}

}  // namespace larql

#endif
