// AVX2 tiles for block-format weights (block_dot.h's contract): a block's 32 stored
// integers (unsigned, qw + z) times the activations' 32 by vpmaddubsw and vpmaddwd, which
// leaves the eight group sums in order (exact: a 16-bit pair sum of w ≤ 63 and |x| ≤ 127
// cannot saturate; q8_0 and mxfp4, signed, go in as |w| and x with w's sign, |w| ≤ 128), z · Σqx
// subtracted, then the float steps per lane with each group's scale. Lanes 0-7 (even blocks) and 8-15 (odd blocks) are two ymm accumulators: decode
// holds both halves of an output, prefill one per pass (grid_tile). Prefill of more tokens
// (quad_tile) holds two groups of four rows per register instead, from the rows unpacked
// and interleaved once per token block (QuadRows).
//
// block_dot_avx2_vnni.cc compiles this file again for CPUs with AVX-VNNI (and AVX2 but no
// AVX-512: Intel's since Alder Lake): the group sums by one vpdpbusd, which starts from
// −z · Σqx, where vpmaddubsw, vpmaddwd and a subtraction took three. The integers are the
// same (exact either way), so the results are too.
#if defined(__x86_64__)

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "kernels/block_unpack_avx2.h"
#include "kernels/matvec_tiles.h"

#ifndef LARQL_AVX_VNNI
#define LARQL_AVX_VNNI 0
#endif
#if LARQL_AVX_VNNI
#undef LARQL_AVX2
#define LARQL_AVX2 __attribute__((target("avx2,fma,f16c,avxvnni")))
#define LARQL_AVX2_TILES(name) name##_vnni
#else
#define LARQL_AVX2_TILES(name) name
#endif

namespace larql {
namespace {

// One block of one row as the tiles multiply it: its 32 stored integers (qw + z; q8_0's
// signed bytes) and each group's scale dw_g and minimum mw_g.
struct BlockWeights {
  __m256i q;
  __m256 dw, mw;
};

// What is read once per chunk of a row: one block.
template <DType T>
struct Chunk {
  const uint8_t* p;
};

template <DType T>
LARQL_AVX2 inline void load_chunk(Chunk<T>& ch, const uint8_t* row, size_t c) {
  ch.p = row + c * dtype_traits(T).block_bytes;
}

// A chunk's block.
template <DType T>
LARQL_AVX2 inline BlockWeights block_weights(const Chunk<T>& ch) {
  __m256 mw = _mm256_setzero_ps();
  if constexpr (blocks::has_min(T)) mw = _mm256_set1_ps(_cvtsh_ss(blocks::load_u16(ch.p + blocks::layout<T>().m)));
  return {block_raw_integers<T>(ch.p), _mm256_set1_ps(block_scale_f16c<T>(ch.p)), mw};
}

// The integer a format's stored values are offset by (what Σ z·qx corrects).
template <DType T>
constexpr int stored_offset() {
  return zero_point<T>();
}

// Σ u·s over each four bytes (u unsigned, s signed), added to `start`.
LARQL_AVX2 inline __m256i dot4(__m256i start, __m256i u, __m256i s) {
#if LARQL_AVX_VNNI
  return _mm256_dpbusd_avx_epi32(start, u, s);
#else  // exact where each pair's sum fits 16 bits, as every caller's does
  return _mm256_add_epi32(start, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
#endif
}

// The offset's share of the group sums as add_scaled_block takes it: z · sx_g (subtracted
// after the dots), or with AVX-VNNI −z · sx_g (where the dots start). From the group sums
// float(sx_g) (decode reads them from QuantizedActivations; z is a power of two).
template <DType T>
LARQL_AVX2 inline __m256i offset_share(__m256 sx) {
  constexpr int kOffset = stored_offset<T>();
  static_assert(kOffset > 0 && (kOffset & (kOffset - 1)) == 0, "a shift stands for the product");
  const __m256i share = _mm256_slli_epi32(_mm256_cvtps_epi32(sx), __builtin_ctz(unsigned(kOffset)));
  return LARQL_AVX_VNNI ? _mm256_sub_epi32(_mm256_setzero_si256(), share) : share;
}

// The same from the block's activations themselves (prefill: no per-lane arrays to
// stream); |z · (qx + qx')| ≤ 32 · 254 fits vpmaddubsw's 16 bits.
template <DType T>
LARQL_AVX2 inline __m256i offset_share(__m256i x) {
  const __m256i z = _mm256_set1_epi8(char(stored_offset<T>()));
  if constexpr (LARQL_AVX_VNNI)  // −z · qx as z · (−qx): qx ≥ −127, so −qx is a signed byte
    return dot4(_mm256_setzero_si256(), z, _mm256_sub_epi8(_mm256_setzero_si256(), x));
  return dot4(_mm256_setzero_si256(), z, x);
}

// float(sx_g) from a block's activations (each four bytes' sum).
LARQL_AVX2 inline __m256 group_sums(__m256i x) { return _mm256_cvtepi32_ps(dot4(_mm256_setzero_si256(), _mm256_set1_epi8(1), x)); }

// One block of one row and token into `lane`, the lanes of the block's half: the float
// steps of the contract, with offset = offset_share's and sx = float(sx_g) where the
// format needs them, and dwdx = dw_g · dx. The eight group sums Σ qw·qx of one block come
// out in order.
template <DType T>
LARQL_AVX2 inline __m256 add_scaled_block(__m256 lane, __m256i q, __m256i x, __m256 dwdx, __m256i offset) {
  constexpr bool kOffset = stored_offset<T>() != 0;
  __m256i u = q, s = x;
  if constexpr (blocks::has_signed_integers(T)) u = _mm256_abs_epi8(q), s = _mm256_sign_epi8(x, q);
  __m256i p = dot4(LARQL_AVX_VNNI && kOffset ? offset : _mm256_setzero_si256(), u, s);
  if constexpr (!LARQL_AVX_VNNI && kOffset) p = _mm256_sub_epi32(p, offset);
  return _mm256_fmadd_ps(dwdx, _mm256_cvtepi32_ps(p), lane);
}

template <DType T>
LARQL_AVX2 inline __m256 add_block(__m256 lane, const BlockWeights& w, __m256i x, __m256 dx, __m256i offset, __m256 sx) {
  lane = add_scaled_block<T>(lane, w.q, x, _mm256_mul_ps(w.dw, dx), offset);
  if constexpr (blocks::has_min(T)) lane = _mm256_fmadd_ps(_mm256_mul_ps(w.mw, dx), sx, lane);
  return lane;
}

// Decode: nr ≤ 4 rows of one token a block at a time, both halves of each output. Each
// block's bytes in the next tile's rows are prefetched as its own are read: the hardware
// prefetcher alone leaves NR interleaved streams of short rows waiting. Q8_0, whose steps
// are fewer, decoded 10-20% slower one row at a time (docs/benchmarks/history.md, "AVX2
// decode one row at a time", on Zen 5), except on Zen 4, where matvec.cc's decode_one_row
// gives it one row a tile.
template <DType T, int NR>
LARQL_AVX2 void interleaved_row_tile(const Tile& t) {
  const size_t cols = t.w->cols, nblocks = cols / 32, token = t.t0;
  const QuantizedActivations& qa = *t.qa;
  const uint8_t* rows[NR];
  for (int r = 0; r < NR; ++r) rows[r] = t.w->row_ptr(t.r0 + r);
  __m256 acc[NR][2];
  for (int r = 0; r < NR; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  const size_t ahead = NR * t.w->row_bytes();
  // Block b into the lanes of half H (b mod 2): a template on H so that every
  // accumulator is a register.
  auto block = [&]<int H>(size_t b) LARQL_AVX2 {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qa.q.data() + token * cols + b * 32));
    const __m256 sx = _mm256_loadu_ps(qa.group_sums(token, b)), dx = _mm256_set1_ps(qa.scale(token, b));
    __m256i offset{};
    if constexpr (stored_offset<T>() != 0) offset = offset_share<T>(sx);
    LARQL_UNROLL_TILE for (int r = 0; r < NR; ++r) {
      Chunk<T> ch;
      load_chunk<T>(ch, rows[r], b);
      _mm_prefetch(reinterpret_cast<const char*>(ch.p) + ahead, _MM_HINT_T0);
      acc[r][H] = add_block<T>(acc[r][H], block_weights<T>(ch), x, dx, offset, sx);
    }
  };
  for (size_t b = 0; b + 1 < nblocks; b += 2) {
    block.template operator()<0>(b);
    block.template operator()<1>(b + 1);
  }
  if (nblocks % 2 == 1) block.template operator()<0>(nblocks - 1);
  for (int r = 0; r < NR; ++r) t.y[token * t.w->rows + t.r0 + size_t(r)] = reduce16(acc[r][0], acc[r][1]);
}

// The 64-bit quarters of four vectors transposed: v[i] becomes [a_i b_i c_i d_i] of the
// a, b, c, d it held. Its own inverse: it interleaves four rows (QuadRows) and takes a
// tile's lanes back to rows.
LARQL_AVX2 inline void transpose_quarters(__m256i (&v)[4]) {
  const __m256i ab_low = _mm256_unpacklo_epi64(v[0], v[1]), ab_high = _mm256_unpackhi_epi64(v[0], v[1]);  // a0 b0 | a2 b2, a1 b1 | a3 b3
  const __m256i cd_low = _mm256_unpacklo_epi64(v[2], v[3]), cd_high = _mm256_unpackhi_epi64(v[2], v[3]);
  v[0] = _mm256_permute2x128_si256(ab_low, cd_low, 0x20);
  v[1] = _mm256_permute2x128_si256(ab_high, cd_high, 0x20);
  v[2] = _mm256_permute2x128_si256(ab_low, cd_low, 0x31);
  v[3] = _mm256_permute2x128_si256(ab_high, cd_high, 0x31);
}

LARQL_AVX2 inline void transpose_quarters(__m256 (&v)[4]) {
  __m256i i[4];
  for (int k = 0; k < 4; ++k) i[k] = _mm256_castps_si256(v[k]);
  transpose_quarters(i);
  for (int k = 0; k < 4; ++k) v[k] = _mm256_castsi256_ps(i[k]);
}

// How the prefill tiles take a format's integers: signed (q − z, and q8_0's and mxfp4's
// own) by the sign trick, |w| against x with w's sign; unsigned as they are stored.
template <DType T>
constexpr bool quad_signed() {
  return blocks::has_signed_integers(T) || stored_offset<T>() != 0;
}

// [f0 f0 f1 f1 f2 f2 f3 f3]: four rows' floats by QuadRows' lanes.
LARQL_AVX2 inline __m256 by_lanes(__m128 four) {
  return _mm256_permutevar8x32_ps(_mm256_set_m128(four, four), _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3));
}

// Rows r0 .. r0 + nr − 1 of the tile into QuadRows (rows past nr as zeros).
template <DType T>
LARQL_AVX2 void unpack_quad_rows(const Tile& t, const QuadRows& out) {
  const size_t blocks = t.w->cols / 32;
  auto store = [](uint8_t* at, __m256 v) LARQL_AVX2 { _mm256_storeu_ps(reinterpret_cast<float*>(at), v); };
  for (size_t b = 0; b < blocks; ++b) {
    __m256i q[4];
    float dw[4] = {}, mw[4] = {};
    LARQL_UNROLL_TILE for (size_t r = 0; r < 4; ++r) {
      if (r >= t.nr) {
        q[r] = _mm256_setzero_si256();
        continue;
      }
      Chunk<T> ch;
      load_chunk<T>(ch, t.w->row_ptr(t.r0 + r), b);
      const BlockWeights w = block_weights<T>(ch);
      q[r] = stored_offset<T>() != 0 ? _mm256_sub_epi8(w.q, _mm256_set1_epi8(char(stored_offset<T>()))) : w.q;
      dw[r] = _mm256_cvtss_f32(w.dw), mw[r] = _mm256_cvtss_f32(w.mw);
    }
    transpose_quarters(q);
    uint8_t* block = out.block(b);
    for (size_t v = 0; v < 4; ++v) _mm256_storeu_si256(reinterpret_cast<__m256i*>(block + 32 * v), q[v]);
    store(block + QuadRows::kScales, by_lanes(_mm_setr_ps(dw[0], dw[1], dw[2], dw[3])));
    store(block + QuadRows::kSecond, by_lanes(_mm_setr_ps(mw[0], mw[1], mw[2], mw[3])));
  }
}

// The prefill tiles take tokens kGroup at a time and k in blocks of kBlockValues.
constexpr size_t kGroup = 3, kBlockValues = 2048;

// Prefill of few tokens (quad_tile's threshold): up to kGridTokens tokens over nr ≤ 4
// rows from the stored rows, kGroup at a time, one half of
// the sixteen lanes per pass over a k-block (as matvec_avx2.cc's f32 tiles): the half's
// NR × 3 accumulators and the operands fit the sixteen registers, where both halves'
// would spill. The k-block's rows stay in L1 for all the tokens; each lane still takes its blocks in order, so the result is the contract's.
// The activations are read as their 8-bit values and one scale per block (the offsets'
// and minimums' group sums recomputed from them), not QuantizedActivations' per-lane
// arrays: those doubled or tripled the bytes a token block streams, past L2 (measured
// 7-27% slower).
template <DType T, int NR>
LARQL_AVX2 void grid_tile(const Tile& t) {
  using C = Chunk<T>;
  constexpr size_t kBlockChunks = kBlockValues / 32;
  const size_t cols = t.w->cols, chunks = cols / 32;
  const QuantizedActivations& qa = *t.qa;
  const uint8_t* rows[NR];
  for (int r = 0; r < NR; ++r) rows[r] = t.w->row_ptr(t.r0 + r);
  PassSums<NR, kGroup> sums;
  C chunk[NR][kBlockChunks];
  // Half H of the chunks [c0, c1) for tokens kGroup·g .. + NT - 1.
  auto pass = [&]<int NT, int H>(size_t g, size_t c0, size_t c1) LARQL_AVX2 {
    const size_t t0 = t.t0 + kGroup * g;
    __m256 acc[NR][NT];
    LARQL_UNROLL_TILE for (int r = 0; r < NR; ++r) LARQL_UNROLL_TILE for (int j = 0; j < NT; ++j) acc[r][j] = sums.lanes[g][H][r][j];
    auto block = [&](size_t b) LARQL_AVX2 {
      __m256i x[NT], offset[NT]{};  // offset and sx stay zero for formats without offsets or minimums
      __m256 dx[NT], sx[NT]{};
      LARQL_UNROLL_TILE for (int j = 0; j < NT; ++j) {
        x[j] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qa.q.data() + (t0 + size_t(j)) * cols + b * 32));
        dx[j] = _mm256_set1_ps(qa.scale(t0 + size_t(j), b));
        if constexpr (stored_offset<T>() != 0) offset[j] = offset_share<T>(x[j]);
        if constexpr (blocks::has_min(T)) sx[j] = group_sums(x[j]);
      }
      LARQL_UNROLL_TILE for (int r = 0; r < NR; ++r) {
        const BlockWeights w = block_weights<T>(chunk[r][b - c0]);
        LARQL_UNROLL_TILE for (int j = 0; j < NT; ++j) acc[r][j] = add_block<T>(acc[r][j], w, x[j], dx[j], offset[j], sx[j]);
      }
    };
    for (size_t b = c0 + H; b < c1; b += 2) block(b);  // c0 is even
    LARQL_UNROLL_TILE for (int r = 0; r < NR; ++r) LARQL_UNROLL_TILE for (int j = 0; j < NT; ++j) sums.lanes[g][H][r][j] = acc[r][j];
  };
  SpreadPrefetch next_rows(t, chunks);  // a k-block's share as its chunks are unpacked
  auto load_chunks = [&](size_t c0, size_t c1) LARQL_AVX2 {
    for (int r = 0; r < NR; ++r)
      for (size_t c = c0; c < c1; ++c) load_chunk<T>(chunk[r][c - c0], rows[r], c);
    for (size_t c = c0; c < c1; ++c) next_rows.step();
  };
  run_passes<kGroup>(chunks, kBlockChunks, t.nt, load_chunks, pass);
  sums.write(t);
}

// Prefill: up to kGridTokens tokens over nr ≤ 4 rows, their rows interleaved (QuadRows),
// kGroup tokens at a time, one half of the sixteen lanes per pass over a k-block: a
// register holds two groups of the four rows, so that one product dw · dx serves four
// rows where each row took its own, and a block's integers are unpacked once per token
// block. Per token the half's four registers hold all four rows; 4 × kGroup accumulators
// and the operands fit the sixteen registers. Each lane still takes its blocks in order
// (the lanes go back to rows by transpose_quarters), so the result is the contract's.
// The activations are read as grid_tile reads them, their 8-bit values (here eight at a
// time, broadcast to the four rows) and one scale per block.
template <DType T>
LARQL_AVX2 void quad_tile(const Tile& t) {
  constexpr bool kSigned = quad_signed<T>(), kMins = blocks::has_min(T);
  const size_t cols = t.w->cols, nblocks = cols / 32;
  thread_local std::vector<uint8_t> own;  // when the caller keeps no rows unpacked
  if (t.unpacked_rows == nullptr) own.resize(QuadRows::bytes(cols));
  const QuadRows rows{t.unpacked_rows != nullptr ? t.unpacked_rows : own.data()};
  if (t.unpack_rows || t.unpacked_rows == nullptr) unpack_quad_rows<T>(t, rows);
  const QuantizedActivations& qa = *t.qa;
  PassSums<4, kGroup> sums;  // [group][half][register][token]
  // Half H of the blocks [b0, b1) for tokens kGroup·g .. + NT − 1.
  auto pass = [&]<int NT, int H>(size_t g, size_t b0, size_t b1) LARQL_AVX2 {
    const size_t t0 = t.t0 + kGroup * g;
    const int8_t* const x0 = qa.q.data() + t0 * cols;
    __m256 acc[NT][4];
    LARQL_UNROLL_TILE for (int j = 0; j < NT; ++j) LARQL_UNROLL_TILE for (int v = 0; v < 4; ++v) acc[j][v] = sums.lanes[g][H][v][j];
    for (size_t b = b0 + H; b < b1; b += 2) {
      const uint8_t* const block = rows.block(b);
      __m256 first[NT], second[NT];  // dw · dx and mw · dx by lanes
      LARQL_UNROLL_TILE for (int j = 0; j < NT; ++j) {
        const __m256 dx = _mm256_set1_ps(qa.scale(t0 + size_t(j), b));
        first[j] = _mm256_mul_ps(_mm256_loadu_ps(reinterpret_cast<const float*>(block + QuadRows::kScales)), dx);
        if constexpr (kMins)
          second[j] = _mm256_mul_ps(_mm256_loadu_ps(reinterpret_cast<const float*>(block + QuadRows::kSecond)), dx);
      }
      LARQL_UNROLL_TILE for (int v = 0; v < 4; ++v) {
        const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 32 * v));
        const __m256i u = kSigned ? _mm256_abs_epi8(w) : w;
        LARQL_UNROLL_TILE for (int j = 0; j < NT; ++j) {
          int64_t eight;
          std::memcpy(&eight, x0 + size_t(j) * cols + 32 * b + 8 * size_t(v), 8);
          const __m256i x = _mm256_set1_epi64x(eight);
          const __m256i p = dot4(_mm256_setzero_si256(), u, kSigned ? _mm256_sign_epi8(x, w) : x);
          acc[j][v] = _mm256_fmadd_ps(first[j], _mm256_cvtepi32_ps(p), acc[j][v]);
          if constexpr (kMins) acc[j][v] = _mm256_fmadd_ps(second[j], group_sums(x), acc[j][v]);
        }
      }
    }
    LARQL_UNROLL_TILE for (int j = 0; j < NT; ++j) LARQL_UNROLL_TILE for (int v = 0; v < 4; ++v) sums.lanes[g][H][v][j] = acc[j][v];
  };
  SpreadPrefetch next_rows(t, nblocks);  // a k-block's share as it starts
  auto prepare = [&](size_t b0, size_t b1) {
    for (size_t b = b0; b < b1; ++b) next_rows.step();
  };
  run_passes<kGroup>(nblocks, kBlockValues / 32, t.nt, prepare, pass);
  for (size_t j = 0; j < t.nt; ++j) {
    __m256 half[2][4];
    for (int h = 0; h < 2; ++h) {
      for (int v = 0; v < 4; ++v) half[h][v] = sums.lanes[j / kGroup][h][v][j % kGroup];
      transpose_quarters(half[h]);  // register v → row v's eight lanes of the half
    }
    for (size_t r = 0; r < t.nr; ++r) t.y[(t.t0 + j) * t.w->rows + t.r0 + r] = reduce16(half[0][r], half[1][r]);
  }
}

using TileFn = void (*)(const Tile&);

template <DType T>
const std::array<TileFn, 4> kGridTiles{&grid_tile<T, 1>, &grid_tile<T, 2>, &grid_tile<T, 3>, &grid_tile<T, 4>};

template <DType T>
const std::array<TileFn, 4> kInterleavedRowTiles{&interleaved_row_tile<T, 1>, &interleaved_row_tile<T, 2>, &interleaved_row_tile<T, 3>,
                                                 &interleaved_row_tile<T, 4>};

// The fewest tokens over a group of rows for which unpacking them into QuadRows pays: below
// it the stored rows' tile (grid_tile) is faster. Measured crossing (5632 × 2048, Zen 5,
// docs/benchmarks/history.md): q8_0 at 5-6 tokens.
constexpr size_t kQuadMinTokens = 6;

template <DType T>
void dispatch(const Tile& t) {
  if (t.nt > 1 && std::max(t.nt, t.block_tokens) >= kQuadMinTokens) quad_tile<T>(t);
  else if (t.nt > 1) kGridTiles<T>[t.nr - 1](t);
  else kInterleavedRowTiles<T>[t.nr - 1](t);
}

}  // namespace

#if !LARQL_AVX_VNNI  // (defined once: the AVX-VNNI copy adds only the tiles)
// block_dot.h's activation contract on eight floats at a time: the same max, division,
// products, clamp and round-to-nearest-even (vcvtps2dq under the default MXCSR, which the
// scalar version's magic-number rounding also follows).
LARQL_AVX2 void quantize_activation_row_avx2(const float* x, QuantizedActivations& qa, size_t r) {
  for (size_t b = 0; b < qa.blocks; ++b) {
    int8_t* qx = &qa.q[r * qa.cols + b * blocks::kValues];
    qa.block_scale[r * qa.blocks + b] = quantize_to_int8_avx2(x + r * qa.cols + b * blocks::kValues, blocks::kValues, qx);
    const __m256i groups = sums_of_four(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(qx)));
    _mm256_storeu_ps(&qa.lane_group_sum[r * qa.lane_stride + 8 * b], _mm256_cvtepi32_ps(groups));
  }
}

#endif

void LARQL_AVX2_TILES(block_tile_avx2)(const Tile& t) {
  blocks::with_32_value_format(t.w->dtype, [&]<DType T>() { dispatch<T>(t); });
}

}  // namespace larql

#endif
