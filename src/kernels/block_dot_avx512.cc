// AVX-512 VNNI tiles for block-format weights (block_dot.h's contract): two blocks per
// zmm (lanes 0-7 the even block's groups, 8-15 the odd one's). vpdpbusd multiplies
// unsigned by signed bytes, four per lane, exactly: the weights go in unsigned, as
// qw + z (the 4-, 5- and 6-bit formats' stored values; q8_0's bytes + 128), the
// activations signed, and z · Σqx (per token, shared by every row) is subtracted after.
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

// Two consecutive blocks of one row as the tiles multiply them: the 64 integers unsigned
// (qw + z; z per format below), and each lane's scale dw_g and minimum mw_g.
struct PairWeights {
  __m512i w;
  __m512 dw, mw;
};

// What is read once per chunk of a row: two blocks for the 32-value formats, a super-block
// of four pairs for the K-quants (its scales unpacked once for all of them).
template <DType T>
struct Chunk {
  static constexpr size_t kPairs = blocks::is_kquant(T) ? 4 : 1;
  static constexpr size_t kBytes = (blocks::is_kquant(T) ? 1 : 2) * dtype_traits(T).block_bytes;
  const uint8_t* p;
  bool whole;    // both blocks present (a row of the 32-value formats may end in a single one)
  __m512 scales;  // q4_k/q5_k: −dmin·m_0..7 then d·s_0..7; q6_k: d·sc_0..15
  __m512i high;   // q5_k: qh, twice; q6_k: unused (each pair reads its half's)
};

// The integer added to each qw to make it unsigned for vpdpbusd.
template <DType T>
constexpr int unsigned_offset() {
  if constexpr (T == DType::q8_0) return 128;
  else if constexpr (T == DType::q6_k) return 32;
  else if constexpr (blocks::is_kquant(T)) return 0;
  else return zero_point<T>();
}

// An f16 as a float, by the CPU's F16C (blocks::half_at is the portable reading).
LARQL_VNNI inline float half(const uint8_t* p) { return _cvtsh_ss(blocks::load_u16(p)); }

template <DType T>
LARQL_VNNI inline Chunk<T> load_chunk(const uint8_t* row, size_t c, size_t blocks) {
  Chunk<T> ch;
  ch.p = row + c * Chunk<T>::kBytes;
  ch.whole = blocks::is_kquant(T) || 2 * c + 1 < blocks;
  if constexpr (T == DType::q6_k) {
    const __m512 s = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(ch.p + blocks::Q6Layout::scales))));
    ch.scales = _mm512_mul_ps(s, _mm512_set1_ps(half(ch.p + blocks::Q6Layout::d)));
  } else if constexpr (blocks::is_kquant(T)) {
    alignas(16) uint8_t sm[16];
    blocks::unpack_scales_mins(ch.p + blocks::k_layout<T>().scales, sm);
    // sm holds the scales then the mins; swap the halves so the mins come first.
    const __m512 s = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(sm))));
    const __m512 d = _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castps_pd(_mm512_set1_ps(-half(ch.p + 2))),
                                                         _mm256_castps_pd(_mm256_set1_ps(half(ch.p))), 1));
    ch.scales = _mm512_mul_ps(_mm512_shuffle_f32x4(s, s, _MM_SHUFFLE(1, 0, 3, 2)), d);
    if constexpr (blocks::k_layout<T>().qh != 0)
      ch.high = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(ch.p + blocks::k_layout<T>().qh)));
  }
  return ch;
}

// Pair i of a chunk.
template <DType T>
LARQL_VNNI inline PairWeights pair_weights(const Chunk<T>& ch, size_t i) {
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  if constexpr (T == DType::q6_k) {
    // Blocks 2i, 2i+1: half i/2 of the super-block; low nibbles of its 64 ql bytes for
    // even i, high ones for odd i; two high bits from qh at 4(i%2) and 4(i%2) + 2.
    const size_t half = i / 2, shift = 4 * (i % 2);
    const __m512i ql = _mm512_loadu_si512(ch.p + blocks::Q6Layout::ql + 64 * half);
    const __m512i nibbles = _mm512_and_si512(shift == 0 ? ql : _mm512_srli_epi16(ql, 4), low4);
    const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(ch.p + blocks::Q6Layout::qh + 32 * half)));
    // Bits 4(i%2) + {0,1} and + {2,3} of qh moved to bits 4-5 of each byte (a 16-bit shift
    // carries bits across bytes, but only into positions the mask clears).
    const __m512i moved = shift == 0 ? _mm512_sllv_epi16(qh, _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(2), 1))
                                     : _mm512_srlv_epi16(qh, _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1));
    const __m512i high = _mm512_and_si512(moved, _mm512_set1_epi8(0x30));
    // Lane L takes scale 4i + L/4 (blocks' halves of 16 values).
    return {_mm512_or_si512(nibbles, high), _mm512_setzero_ps(), _mm512_setzero_ps()};  // scales: see scale_lanes
  } else if constexpr (blocks::is_kquant(T)) {
    // Blocks 2i (low nibbles) and 2i+1 (high nibbles) of the same 32 bytes.
    const __m512i packed = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(ch.p + blocks::k_layout<T>().qs + 32 * i)));
    __m512i w = _mm512_and_si512(_mm512_srlv_epi16(packed, _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(4), 1)), low4);
    if constexpr (blocks::k_layout<T>().qh != 0) {
      const __m512i bit = _mm512_inserti64x4(_mm512_set1_epi8(char(1 << (2 * i))), _mm256_set1_epi8(char(2 << (2 * i))), 1);
      w = _mm512_mask_add_epi8(w, _mm512_test_epi8_mask(ch.high, bit), w, _mm512_set1_epi8(0x10));
    }
    return {w, _mm512_setzero_ps(), _mm512_setzero_ps()};  // scales: see scale_lanes; minimums: per chunk
  } else {
    const uint8_t* even = ch.p;
    const uint8_t* odd = ch.whole ? even + dtype_traits(T).block_bytes : even;
    const __m512i low = _mm512_inserti64x4(_mm512_castsi256_si512(block_low_integers<T>(even)),
                                           ch.whole ? block_low_integers<T>(odd) : _mm256_setzero_si256(), 1);
    __m512i w = low;
    if constexpr (T == DType::q8_0) {
      w = _mm512_xor_si512(low, _mm512_set1_epi8(char(0x80)));  // + 128
    } else if constexpr (blocks::layout<T>().qh != 0) {
      // The fifth bits of both blocks as one mask register.
      constexpr size_t qh = blocks::layout<T>().qh;
      const __mmask64 high = __mmask64(blocks::load_u32(even + qh)) | (ch.whole ? __mmask64(blocks::load_u32(odd + qh)) << 32 : 0);
      w = _mm512_mask_add_epi8(low, high, low, _mm512_set1_epi8(0x10));
    }
    __m512 mw = _mm512_setzero_ps();
    if constexpr (blocks::has_min(T)) mw = pair_of_halves(even + blocks::layout<T>().m, odd + blocks::layout<T>().m);
    return {w, pair_of_halves(even, odd), mw};
  }
}

// K-quants: the chunk's scales times each token's dx, once per chunk (the same products
// the contract's dw_g · dx are): q4_k/q5_k lanes 8 + k hold d·s_k·dx_k (lanes 0-7, the
// minimums, stay unscaled); q6_k lane s holds d·sc_s·dx_{s/2}.
template <DType T>
LARQL_VNNI inline __m512 token_scales(const float* dx8) {
  const __m512 dx = _mm512_castps256_ps512(_mm256_loadu_ps(dx8));
  if constexpr (T == DType::q6_k)
    return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7), dx);
  else
    return _mm512_permutexvar_ps(_mm512_setr_epi32(16, 16, 16, 16, 16, 16, 16, 16, 0, 1, 2, 3, 4, 5, 6, 7),
                                 _mm512_mask_mov_ps(dx, 0xFF00, _mm512_set1_ps(1.0f)));
}

// Pair i's lanes of those products: block 2i's scales in lanes 0-7, 2i+1's in 8-15.
template <DType T>
LARQL_VNNI inline __m512 scale_lanes(__m512 products, size_t i) {
  if constexpr (T == DType::q6_k)  // lane L: scale 4i + L/4 (a scale per 16 values)
    return _mm512_permutexvar_ps(_mm512_add_epi32(_mm512_set1_epi32(int(4 * i)),
                                                  _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3)),
                                 products);
  else
    return _mm512_permutexvar_ps(_mm512_inserti64x4(_mm512_set1_epi32(int(8 + 2 * i)), _mm256_set1_epi32(int(9 + 2 * i)), 1), products);
}

template <DType T, int NR, int NT>
LARQL_VNNI void block_tile(const Tile& t) {
  using C = Chunk<T>;
  const size_t cols = t.w->cols, blocks = cols / 32, chunks = (blocks + 2 * C::kPairs - 1) / (2 * C::kPairs);
  constexpr bool kMin = blocks::has_min(T) && !blocks::is_kquant(T);          // per pair
  constexpr bool kChunkMin = blocks::has_min(T) && blocks::is_kquant(T);     // per super-block
  constexpr int kZero = unsigned_offset<T>();
  const QuantizedActivations& qa = *t.qa;
  const uint8_t* rows[NR];
  for (int r = 0; r < NR; ++r) rows[r] = t.w->row_ptr(t.r0 + r);
  // Each chunk's bytes in the next tile's rows are prefetched as this one reads its own
  // (the hardware prefetcher alone leaves NR interleaved streams of short rows waiting).
  const size_t ahead = NR * t.w->row_bytes();
  __m512 acc[NR][NT];
  for (int r = 0; r < NR; ++r)
    for (int j = 0; j < NT; ++j) acc[r][j] = _mm512_setzero_ps();
  for (size_t c = 0; c < chunks; ++c) {
    C chunk[NR];
    for (int r = 0; r < NR; ++r) {
      chunk[r] = load_chunk<T>(rows[r], c, blocks);
      for (size_t at = 0; at < C::kBytes; at += 64) _mm_prefetch(reinterpret_cast<const char*>(chunk[r].p) + ahead + at, _MM_HINT_T0);
    }
    [[maybe_unused]] __m512 products[NR][NT];  // K-quants: scales times dx (token_scales)
    if constexpr (blocks::is_kquant(T))
      for (int j = 0; j < NT; ++j) {
        const __m512 dx = token_scales<T>(&qa.block_scale[(t.t0 + size_t(j)) * blocks + 8 * c]);
        for (int r = 0; r < NR; ++r) products[r][j] = _mm512_mul_ps(chunk[r].scales, dx);
      }
    for (size_t i = 0; i < C::kPairs; ++i) {
      const size_t b = 2 * (c * C::kPairs + i);
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
        const PairWeights pw = pair_weights<T>(chunk[r], i);
        for (int j = 0; j < NT; ++j) {
          __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), pw.w, x[j]);
          if constexpr (kZero != 0) p = _mm512_sub_epi32(p, offset[j]);
          const __m512 scale = blocks::is_kquant(T) ? scale_lanes<T>(products[r][j], i) : _mm512_mul_ps(pw.dw, dx[j]);
          acc[r][j] = _mm512_mask3_fmadd_ps(scale, _mm512_cvtepi32_ps(p), acc[r][j], lanes);
          if constexpr (kMin) acc[r][j] = _mm512_mask3_fmadd_ps(_mm512_mul_ps(pw.mw, dx[j]), sx[j], acc[r][j], lanes);
        }
      }
    }
    if constexpr (kChunkMin)
      for (int j = 0; j < NT; ++j) {
        const __m512 t_k = _mm512_maskz_loadu_ps(0x00FF, qa.block_sums(t.t0 + size_t(j), 8 * c));
        for (int r = 0; r < NR; ++r) acc[r][j] = _mm512_mask3_fmadd_ps(chunk[r].scales, t_k, acc[r][j], 0x00FF);
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
