// AVX2 tiles: the sixteen lanes of the contract in matvec.h as two ymm registers (lanes
// 0-7 and 8-15), so results equal the AVX-512 and scalar versions bit for bit.
//
// Decode (one token) holds both halves of each output. Prefill holds one: a tile of four
// rows × three tokens runs over a block of k twice, once per half of the sixteen lanes,
// twelve accumulators and four operands in the sixteen registers (both halves would leave
// room for four outputs, whose loads and conversions the two FMA ports then wait for).
// Each lane still takes its elements in order of k, so the result is the contract's. bf16
// weights are split into even and odd elements (one shift or mask per sixteen values, not
// two widenings per eight): the halves are then lanes 0, 2, .., 14 and 1, 3, .., 15, and
// the activations are arranged to match (arrange_activations_avx2).
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
    if (t.prefetch_next_rows && (k * kValueBytes) % 64 == 0)
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

// Half h of the sixteen values of chunk c of a row: values 8h .. 8h+7, or for bf16 the
// even (h = 0) or odd (h = 1) ones.
template <DType T, int H>
LARQL_AVX2 inline __m256 half_chunk(const uint8_t* row, size_t c) {
  if constexpr (T == DType::bf16) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 32 * c));
    if constexpr (H == 0) return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
    else return _mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32(int(0xffff0000u))));
  } else {
    return load8<T>(row, 16 * c + 8 * H);
  }
}

// Chunks per block of k: the tile's rows and tokens over one block stay in L1 (4 × 512 ×
// 2 bytes of bf16 weights and 3 × 512 × 4 of activations) for the second half's pass.
constexpr size_t kBlockChunks = 32;

// Prefill: nr ≤ 4 rows × nt ≤ 3 tokens from t.xa (arrange_activations_avx2).
template <DType T, int NR, int NT>
LARQL_AVX2 void grid_tile(const Tile& t) {
  const size_t n = t.w->cols, chunks = (n + 15) / 16, full = n / 16;
  const uint8_t* rows[NR];
  const float* xs[NT];
  for (int r = 0; r < NR; ++r) rows[r] = t.w->row_ptr(t.r0 + r);
  for (int j = 0; j < NT; ++j) xs[j] = t.xa + (t.t0 + j) * 16 * chunks;
  // The last, partial chunk of each row, zero-padded.
  alignas(32) uint8_t tail[NR][64] = {};
  if (full < chunks)
    for (int r = 0; r < NR; ++r) std::copy(rows[r] + dtype_bytes(T, 16 * full), rows[r] + t.w->row_bytes(), tail[r]);
  __m256 saved[2][NR][NT];
  for (int h = 0; h < 2; ++h)
    for (int r = 0; r < NR; ++r)
      for (int j = 0; j < NT; ++j) saved[h][r][j] = _mm256_setzero_ps();
  constexpr size_t kChunkBytes = T == DType::f32 ? 64 : 32;
  const size_t ahead = NR * t.w->row_bytes();
  auto pass = [&]<int H>(size_t c0, size_t c1) LARQL_AVX2 {
    __m256 acc[NR][NT];
    LARQL_UNROLL_TILE for (int r = 0; r < NR; ++r) LARQL_UNROLL_TILE for (int j = 0; j < NT; ++j) acc[r][j] = saved[H][r][j];
    auto step = [&](const uint8_t* const* w, size_t c, size_t wc) LARQL_AVX2 {
      __m256 x[NT];
      LARQL_UNROLL_TILE for (int j = 0; j < NT; ++j) x[j] = _mm256_loadu_ps(xs[j] + 16 * c + 8 * H);
      LARQL_UNROLL_TILE for (int r = 0; r < NR; ++r) {
        const __m256 v = half_chunk<T, H>(w[r], wc);
        LARQL_UNROLL_TILE for (int j = 0; j < NT; ++j) acc[r][j] = _mm256_fmadd_ps(v, x[j], acc[r][j]);
      }
    };
    const size_t main_end = std::min(c1, full);
    size_t c = c0;
    if (H == 0 && t.prefetch_next_rows)  // one prefetch per row and 64 bytes
      for (constexpr size_t kPerLine = 64 / kChunkBytes; c + kPerLine <= main_end; c += kPerLine) {
        LARQL_UNROLL_TILE for (int r = 0; r < NR; ++r)
          _mm_prefetch(reinterpret_cast<const char*>(rows[r] + c * kChunkBytes + ahead), _MM_HINT_T0);
        for (size_t i = 0; i < kPerLine; ++i) step(rows, c + i, c + i);
      }
    for (; c < main_end; ++c) step(rows, c, c);
    if (main_end < c1) {
      const uint8_t* padded[NR];
      for (int r = 0; r < NR; ++r) padded[r] = tail[r];
      step(padded, full, 0);
    }
    LARQL_UNROLL_TILE for (int r = 0; r < NR; ++r) LARQL_UNROLL_TILE for (int j = 0; j < NT; ++j) saved[H][r][j] = acc[r][j];
  };
  for (size_t c0 = 0; c0 < chunks; c0 += kBlockChunks) {
    const size_t c1 = std::min(chunks, c0 + kBlockChunks);
    pass.template operator()<0>(c0, c1);
    pass.template operator()<1>(c0, c1);
  }
  for (int r = 0; r < NR; ++r)
    for (int j = 0; j < NT; ++j) {
      __m256 lo = saved[0][r][j], hi = saved[1][r][j];
      if constexpr (T == DType::bf16) {  // even and odd lanes back to 0-7 and 8-15
        const __m256 a = _mm256_unpacklo_ps(lo, hi), b = _mm256_unpackhi_ps(lo, hi);
        lo = _mm256_permute2f128_ps(a, b, 0x20);
        hi = _mm256_permute2f128_ps(a, b, 0x31);
      }
      t.y[(t.t0 + j) * t.w->rows + t.r0 + r] = reduce16(lo, hi);
    }
}

using TileFn = void (*)(const Tile&);

template <DType T>
const std::array<TileFn, 4> kRowTiles{&row_tile<T, 1>, &row_tile<T, 2>, &row_tile<T, 3>, &row_tile<T, 4>};

template <DType T>
const std::array<TileFn, 12> kGridTiles{
    &grid_tile<T, 1, 1>, &grid_tile<T, 1, 2>, &grid_tile<T, 1, 3>, &grid_tile<T, 2, 1>, &grid_tile<T, 2, 2>, &grid_tile<T, 2, 3>,
    &grid_tile<T, 3, 1>, &grid_tile<T, 3, 2>, &grid_tile<T, 3, 3>, &grid_tile<T, 4, 1>, &grid_tile<T, 4, 2>, &grid_tile<T, 4, 3>};

template <DType T>
void dispatch(const Tile& t) {
  if (t.xa) kGridTiles<T>[(t.nr - 1) * 3 + (t.nt - 1)](t);
  else kRowTiles<T>[t.nr - 1](t);
}

}  // namespace

void arrange_activations_avx2(const float* x, size_t n, size_t cols, bool even_odd, float* out) {
  const size_t chunks = (cols + 15) / 16;
  for (size_t t = 0; t < n; ++t) {
    float* o = out + t * 16 * chunks;
    std::fill(o, o + 16 * chunks, 0.0f);
    for (size_t k = 0; k < cols; ++k) {
      const size_t i = k % 16;
      o[k - i + (even_odd ? i / 2 + 8 * (i % 2) : i)] = x[t * cols + k];
    }
  }
}

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
    case DType::q6_k: break;  // block formats have their own tiles (block_dot.h)
  }
}

}  // namespace larql

#endif
