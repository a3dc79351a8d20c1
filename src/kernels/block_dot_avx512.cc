// AVX-512 VNNI tiles for block-format weights (block_dot.h's contract): two blocks per
// zmm (lanes 0-7 the even block's groups, 8-15 the odd one's). vpdpbusd multiplies
// unsigned by signed bytes, four per lane, exactly: the weights go in unsigned, as
// qw + z (the 4- and 5-bit formats' stored values; q8_0's bytes + 128), the activations
// signed, and z · Σqx (per token, shared by every row) is subtracted after.
#if defined(__x86_64__)

#include <immintrin.h>

#include <array>
#include <utility>

#include "kernels/block_unpack_avx2.h"
#include "kernels/matvec_tiles.h"

#define LARQL_VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))

namespace larql {
namespace {

// [f16 at a] × 8, [f16 at b] × 8 as floats.
LARQL_VNNI inline __m512 pair_of_halves(const uint8_t* a, const uint8_t* b) {
  const __m128i both = _mm_cvtsi32_si128(int(uint32_t(blocks::load_u16(a)) | uint32_t(blocks::load_u16(b)) << 16));
  return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1),
                               _mm512_castps128_ps512(_mm_cvtph_ps(both)));
}

// Both blocks' stored integers, unsigned (qw + z).
template <DType T>
LARQL_VNNI inline __m512i unsigned_pair(const uint8_t* even, const uint8_t* odd, bool whole) {
  const __m512i low = _mm512_inserti64x4(_mm512_castsi256_si512(block_low_integers<T>(even)),
                                         whole ? block_low_integers<T>(odd) : _mm256_setzero_si256(), 1);
  if constexpr (T == DType::q8_0) {
    return _mm512_xor_si512(low, _mm512_set1_epi8(char(0x80)));  // + 128
  } else {
    constexpr size_t qh = blocks::layout<T>().qh;
    if constexpr (qh == 0) return low;
    // The fifth bits of both blocks as one mask register.
    const __mmask64 high = __mmask64(blocks::load_u32(even + qh)) | (whole ? __mmask64(blocks::load_u32(odd + qh)) << 32 : 0);
    return _mm512_mask_add_epi8(low, high, low, _mm512_set1_epi8(0x10));
  }
}

// How far ahead of the pair in use each row is prefetched (the hardware prefetcher alone
// leaves eight interleaved 34-byte-block streams short of the memory's bandwidth).
constexpr size_t kPrefetchBytes = 3072;

template <DType T, int NR, int NT>
LARQL_VNNI void block_tile(const Tile& t) {
  const size_t cols = t.w->cols, blocks = cols / 32, pairs = (blocks + 1) / 2;
  constexpr size_t kBlockBytes = dtype_traits(T).block_bytes;
  constexpr bool kMin = blocks::has_min(T);
  const QuantizedActivations& qa = *t.qa;
  const uint8_t* rows[NR];
  for (int r = 0; r < NR; ++r) rows[r] = t.w->row_ptr(t.r0 + r);
  __m512 acc[NR][NT];
  for (int r = 0; r < NR; ++r)
    for (int j = 0; j < NT; ++j) acc[r][j] = _mm512_setzero_ps();
  constexpr int kZero = T == DType::q8_0 ? 128 : zero_point<T>();
  for (size_t pair = 0; pair < pairs; ++pair) {
    const size_t b = 2 * pair;
    const bool whole = b + 1 < blocks;
    const __mmask16 lanes = whole ? 0xFFFF : 0x00FF;
    const __mmask64 bytes = whole ? ~__mmask64{0} : __mmask64{0xFFFFFFFF};
    __m512i x[NT], offset[NT];
    __m512 dx[NT], sx[NT];
    for (int j = 0; j < NT; ++j) {
      const size_t token = t.t0 + size_t(j);
      x[j] = _mm512_maskz_loadu_epi8(bytes, qa.q.data() + token * cols + b * 32);
      dx[j] = _mm512_loadu_ps(&qa.lane_scale[token * qa.lane_stride + 8 * b]);
      sx[j] = _mm512_loadu_ps(qa.group_sums(token, b));
      offset[j] = _mm512_mullo_epi32(_mm512_cvtps_epi32(sx[j]), _mm512_set1_epi32(kZero));  // z · Σqx, exact
    }
    for (int r = 0; r < NR; ++r) {
      const uint8_t* even = rows[r] + b * kBlockBytes;
      const uint8_t* odd = whole ? even + kBlockBytes : even;
      _mm_prefetch(reinterpret_cast<const char*>(even) + kPrefetchBytes, _MM_HINT_T0);
      if constexpr (2 * kBlockBytes > 64)  // a pair of q8_0 blocks spans more than one line
        _mm_prefetch(reinterpret_cast<const char*>(even) + kPrefetchBytes + 2 * kBlockBytes - 1, _MM_HINT_T0);
      const __m512i w = unsigned_pair<T>(even, odd, whole);
      const __m512 dw = pair_of_halves(even, odd);
      __m512 mw = _mm512_setzero_ps();
      if constexpr (kMin) mw = pair_of_halves(even + blocks::layout<T>().m, odd + blocks::layout<T>().m);
      for (int j = 0; j < NT; ++j) {
        __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w, x[j]);
        if constexpr (kZero != 0) p = _mm512_sub_epi32(p, offset[j]);
        acc[r][j] = _mm512_mask3_fmadd_ps(_mm512_mul_ps(dw, dx[j]), _mm512_cvtepi32_ps(p), acc[r][j], lanes);
        if constexpr (kMin) acc[r][j] = _mm512_mask3_fmadd_ps(_mm512_mul_ps(mw, dx[j]), sx[j], acc[r][j], lanes);
      }
    }
  }
  for (int r = 0; r < NR; ++r)
    for (int j = 0; j < NT; ++j) {
      alignas(64) float out[16];
      _mm512_store_ps(out, acc[r][j]);
      t.y[(t.t0 + size_t(j)) * t.w->rows + t.r0 + size_t(r)] = reduce16(out);
    }
}

using TileFn = void (*)(const Tile&);

template <DType T, int... I>
constexpr std::array<TileFn, 16> grid_for(std::integer_sequence<int, I...>) {
  return {&block_tile<T, I / 4 + 1, I % 4 + 1>...};
}

// Decode: up to eight rows at once; prefill: up to 4 rows × 4 tokens.
template <DType T>
void dispatch(const Tile& t) {
  static constexpr TileFn rows[8] = {&block_tile<T, 1, 1>, &block_tile<T, 2, 1>, &block_tile<T, 3, 1>, &block_tile<T, 4, 1>,
                                     &block_tile<T, 5, 1>, &block_tile<T, 6, 1>, &block_tile<T, 7, 1>, &block_tile<T, 8, 1>};
  static constexpr std::array<TileFn, 16> grid = grid_for<T>(std::make_integer_sequence<int, 16>{});
  if (t.nt == 1) rows[t.nr - 1](t);
  else grid[(t.nr - 1) * 4 + (t.nt - 1)](t);
}

}  // namespace

void block_tile_vnni(const Tile& t) {
  blocks::with_block_format(t.w->dtype, [&]<DType T>() { dispatch<T>(t); });
}

}  // namespace larql

#endif
