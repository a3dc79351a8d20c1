// AVX2 tiles for block-format weights (block_dot.h's contract): a block's 32 integers and
// the activations' 32 widened to int16 and multiplied by vpmaddwd (exact: no byte
// saturation), summed into the eight groups, then the two float steps per lane. Lanes
// 0-7 (even blocks) and 8-15 (odd blocks) are two ymm accumulators.
#if defined(__x86_64__)

#include <immintrin.h>

#include <array>
#include <utility>

#include "kernels/block_unpack_avx2.h"
#include "kernels/matvec_tiles.h"

namespace larql {
namespace {

template <DType T, int NR, int NT>
LARQL_AVX2 void block_tile(const Tile& t) {
  const size_t cols = t.w->cols, blocks = cols / 32;
  constexpr size_t kBlockBytes = dtype_traits(T).block_bytes;
  const QuantizedActivations& qa = *t.qa;
  const uint8_t* rows[NR];
  for (int r = 0; r < NR; ++r) rows[r] = t.w->row_ptr(t.r0 + r);
  __m256 acc[NR][NT][2];
  for (int r = 0; r < NR; ++r)
    for (int j = 0; j < NT; ++j) acc[r][j][0] = acc[r][j][1] = _mm256_setzero_ps();
  const __m256i group_order = _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7);
  for (size_t b = 0; b < blocks; ++b) {
    const int half = int(b % 2);
    __m256i xlo[NT], xhi[NT];
    float dx[NT];
    for (int j = 0; j < NT; ++j) {
      const size_t token = t.t0 + size_t(j);
      const int8_t* qx = qa.q.data() + token * cols + b * 32;
      xlo[j] = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qx)));
      xhi[j] = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qx + 16)));
      dx[j] = qa.scale(token, b);
    }
    for (int r = 0; r < NR; ++r) {
      const uint8_t* block = rows[r] + b * kBlockBytes;
      const __m256i q = block_integers<T>(block);
      const __m256i wlo = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(q)), whi = _mm256_cvtepi8_epi16(_mm256_extracti128_si256(q, 1));
      const float dw = _cvtsh_ss(blocks::load_u16(block));
      for (int j = 0; j < NT; ++j) {
        const __m256i pairs = _mm256_hadd_epi32(_mm256_madd_epi16(wlo, xlo[j]), _mm256_madd_epi16(whi, xhi[j]));
        const __m256 groups = _mm256_cvtepi32_ps(_mm256_permutevar8x32_epi32(pairs, group_order));
        __m256& lane = acc[r][j][half];
        lane = _mm256_fmadd_ps(_mm256_set1_ps(dw * dx[j]), groups, lane);
        if constexpr (blocks::has_min(T)) {
          const float mw = _cvtsh_ss(blocks::load_u16(block + blocks::layout<T>().m));
          lane = _mm256_fmadd_ps(_mm256_set1_ps(mw * dx[j]), _mm256_loadu_ps(qa.group_sums(t.t0 + size_t(j), b)), lane);
        }
      }
    }
  }
  for (int r = 0; r < NR; ++r)
    for (int j = 0; j < NT; ++j) {
      alignas(32) float lanes[16];
      _mm256_store_ps(lanes, acc[r][j][0]);
      _mm256_store_ps(lanes + 8, acc[r][j][1]);
      t.y[(t.t0 + size_t(j)) * t.w->rows + t.r0 + size_t(r)] = reduce16(lanes);
    }
}

using TileFn = void (*)(const Tile&);

// Decode: up to four rows; prefill: up to 2 rows × 2 tokens.
template <DType T>
void dispatch(const Tile& t) {
  static constexpr TileFn rows[4] = {&block_tile<T, 1, 1>, &block_tile<T, 2, 1>, &block_tile<T, 3, 1>, &block_tile<T, 4, 1>};
  static constexpr TileFn grid[4] = {&block_tile<T, 1, 1>, &block_tile<T, 1, 2>, &block_tile<T, 2, 1>, &block_tile<T, 2, 2>};
  if (t.nt == 1) rows[t.nr - 1](t);
  else grid[(t.nr - 1) * 2 + (t.nt - 1)](t);
}

}  // namespace

void block_tile_avx2(const Tile& t) {
  blocks::with_block_format(t.w->dtype, [&]<DType T>() { dispatch<T>(t); });
}

}  // namespace larql

#endif
