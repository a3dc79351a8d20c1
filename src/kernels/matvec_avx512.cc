// AVX-512 tiles: one zmm accumulator (sixteen lanes) per (row, token), as the contract in
// matvec.h says, up to 6 rows × 4 tokens per tile (8 rows of one token in decode).
#if defined(__x86_64__)

#include "base/simd_avx512.h"

#include <array>

#include "kernels/matvec_tiles.h"

#define LARQL_AVX512 LARQL_AVX512_TARGET("avx512f,avx2,fma,f16c")

namespace larql {
namespace {

template <DType T>
LARQL_AVX512 inline __m512 load16(const uint8_t* row, size_t k) {
  if constexpr (T == DType::f32) {
    return _mm512_loadu_ps(reinterpret_cast<const float*>(row) + k);
  } else {
    const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(reinterpret_cast<const uint16_t*>(row) + k));
    if constexpr (T == DType::bf16)
      return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(raw), 16));
    else
      return _mm512_cvtph_ps(raw);
  }
}

// Tail: the rows' length is not a multiple of sixteen, and only then (dispatch). A separate
// instantiation: with the tail's step in the same function GCC keeps the accumulators on
// the stack between the loop and the epilogue (3-10% of a product).
template <DType T, int NR, int NT, bool Tail>
LARQL_AVX512 void tile_fixed(const Tile& t) {
  const size_t n = t.w->cols, main = n / 16 * 16;
  const uint8_t* rows[NR];
  const float* xs[NT];
  for (int r = 0; r < NR; ++r) rows[r] = t.w->row_ptr(t.r0 + r);
  for (int j = 0; j < NT; ++j) xs[j] = t.x + (t.t0 + j) * n;
  __m512 acc[NR][NT];
  for (int r = 0; r < NR; ++r)
    for (int j = 0; j < NT; ++j) acc[r][j] = _mm512_setzero_ps();
  // Decode: each row prefetches its bytes in the next tile's rows, one line per 64 bytes.
  constexpr size_t kValueBytes = T == DType::f32 ? 4 : 2;
  const size_t ahead = NR * t.w->row_bytes();
  SpreadPrefetch next_rows(t, main / 16);
  for (size_t k = 0; k < main; k += 16) {
    if constexpr (NT > 1)
      next_rows.step();
    else if ((k * kValueBytes) % 64 == 0)
      for (int r = 0; r < NR; ++r) _mm_prefetch(reinterpret_cast<const char*>(rows[r] + k * kValueBytes + ahead), _MM_HINT_T0);
    __m512 xv[NT];
    for (int j = 0; j < NT; ++j) xv[j] = _mm512_loadu_ps(xs[j] + k);
    for (int r = 0; r < NR; ++r) {
      const __m512 w = load16<T>(rows[r], k);
      for (int j = 0; j < NT; ++j) acc[r][j] = _mm512_fmadd_ps(w, xv[j], acc[r][j]);
    }
  }
  if constexpr (Tail) {  // zero-padded to sixteen lanes
    __m512 xv[NT];
    for (int j = 0; j < NT; ++j) {
      alignas(64) float pad[16] = {};
      for (size_t k = main; k < n; ++k) pad[k - main] = xs[j][k];
      xv[j] = _mm512_load_ps(pad);
    }
    for (int r = 0; r < NR; ++r) {
      alignas(64) float pad[16] = {};
      for (size_t k = main; k < n; ++k) pad[k - main] = load_as_f32(T, rows[r], k);
      const __m512 w = _mm512_load_ps(pad);
      for (int j = 0; j < NT; ++j) acc[r][j] = _mm512_fmadd_ps(w, xv[j], acc[r][j]);
    }
  }
  store_reduced(acc, t.y + t.t0 * t.w->rows + t.r0, t.w->rows);
}

using TileFn = void (*)(const Tile&);

template <DType T, bool Tail, int... I>
constexpr std::array<TileFn, 24> table_for(std::integer_sequence<int, I...>) {
  return {&tile_fixed<T, I / 4 + 1, I % 4 + 1, Tail>...};
}

template <DType T, bool Tail>
const std::array<TileFn, 24> kTiles = table_for<T, Tail>(std::make_integer_sequence<int, 24>{});

// Decode (one token): up to eight rows at once, eight independent weight streams.
template <DType T, bool Tail>
const std::array<TileFn, 8> kRowTiles{&tile_fixed<T, 1, 1, Tail>, &tile_fixed<T, 2, 1, Tail>, &tile_fixed<T, 3, 1, Tail>,
                                      &tile_fixed<T, 4, 1, Tail>, &tile_fixed<T, 5, 1, Tail>, &tile_fixed<T, 6, 1, Tail>,
                                      &tile_fixed<T, 7, 1, Tail>, &tile_fixed<T, 8, 1, Tail>};

template <DType T, bool Tail>
void dispatch_with(const Tile& t) {
  if (t.nt == 1)
    kRowTiles<T, Tail>[t.nr - 1](t);
  else
    kTiles<T, Tail>[(t.nr - 1) * 4 + (t.nt - 1)](t);
}

template <DType T>
void dispatch(const Tile& t) {
  if (t.w->cols % 16 != 0)
    dispatch_with<T, true>(t);
  else
    dispatch_with<T, false>(t);
}

}  // namespace

void tile_avx512(const Tile& t) {
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
