// Internal to matvec.cc and its ISA files: one tile of a matmul and the lane reduction
// every version shares.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#if defined(__x86_64__)
#include "base/simd_avx512.h"
#endif

#include "kernels/bf16_dot.h"
#include "kernels/block_dot.h"
#include "kernels/dtype.h"
#include "kernels/kquant_dot.h"

// A tile's loops over rows and tokens are unrolled, so that its accumulators stay in
// registers (GCC's own limits leave them as loops over arrays on the stack); dot.cc's
// loops over sixteen accumulators unroll completely. Not under AddressSanitizer, nor in
// the SIMDe-emulated test build (tests/CMakeLists.txt), where the unrolled functions take
// minutes to compile and what is checked is their results, not their speed.
#if defined(__SANITIZE_ADDRESS__) || defined(LARQL_EMULATE_AVX512)
#define LARQL_UNROLL_TILE
#define LARQL_UNROLL_16
#else
#define LARQL_UNROLL_TILE _Pragma("GCC unroll 8")
#define LARQL_UNROLL_16 _Pragma("GCC unroll 16")
#endif

namespace larql {

// Rows [r0, r0 + nr) of w against tokens [t0, t0 + nt) of x, into y ([n][w.rows]).
struct Tile {
  const Matrix* w;
  const float* x;
  float* y;
  size_t r0, nr, t0, nt;
  const QuantizedActivations* qa = nullptr;  // x quantised, for the 32-value block formats
  const SuperBlockActivations* qk = nullptr;  // x quantised per super-block, for the K-quants (kquant_dot.h)
  const bf16dot::RoundedActivations* xb = nullptr;  // x rounded to bf16 (bf16_dot.h)
  // Prefill: cache lines this tile prefetches while it computes, spread over its steps
  // (SpreadPrefetch). The last few tiles over a row group in a token block each take a
  // part of the next group's rows (matmul_with), so that the next group's first tile
  // finds them in cache instead of waiting for DRAM. Decode tiles prefetch their own way.
  const uint8_t* prefetch = nullptr;
  size_t prefetch_lines = 0;
  // The block-format prefill tiles: room for their rows unpacked (AVX-512: UnpackedRow::bytes
  // each, KquantRows::bytes for the K-quants; AVX2: QuadRows::bytes). The first tile over a group of rows in a token block
  // unpacks them there (unpack_rows), the others over the same rows read them back; null:
  // unpack every time.
  uint8_t* unpacked_rows = nullptr;
  bool unpack_rows = true;
  // Tokens of the token block this tile is one of: how many share the rows unpacked (0:
  // this tile's own).
  size_t block_tokens = 0;
};

// A block-format row as the AVX-512 tiles multiply it, at base: per whole pair of blocks
// three 64-byte slots: its integers (as vpdpbusd takes them), its lane scales dw, and the
// dots' start (formats whose integers go in signed) or the minimums mw. Every format keeps
// the three slots' stride, used or not.
struct UnpackedRow {
  static constexpr size_t kDw = 64, kLast = 128;  // the slots' offsets in a pair's 192 bytes
  static size_t bytes(size_t cols) { return cols / 64 * 192; }
  uint8_t* base;
  size_t cols;
  uint8_t* pair(size_t p) const { return base + 192 * p; }
};

// Four block-format rows as the AVX2 prefill tiles multiply them, at base: per block 192
// bytes: its integers in four 32-byte vectors, then two vectors of eight floats. Vector v
// of a block holds groups 2v and 2v + 1 (values 8v .. 8v + 7) of the four rows, eight bytes
// each, so that its int32 lane 2r + e is row r's group 2v + e; the floats go by the same
// lanes. The tiles' first over a group of rows in a token block
// writes them (Tile::unpack_rows), the others read them (Tile::unpacked_rows).
struct QuadRows {
  static constexpr size_t kScales = 128, kSecond = 160, kBlockBytes = 192;  // the integers at 0
  static size_t bytes(size_t cols) { return cols / 32 * kBlockBytes; }
  uint8_t* base;
  uint8_t* block(size_t b) const { return base + kBlockBytes * b; }
};

// Whether a product of several tokens keeps rows of t unpacked. Not q8_0's, whose integers
// are stored as they are multiplied: its rows kept unpacked (3 bytes per value) left L1
// for L2 and made the down product slower (docs/benchmarks/history.md). The K-quants keep
// theirs another way (KquantRows).
inline bool keeps_unpacked_rows(DType t) { return dtype_is_blocked(t) && t != DType::q8_0 && !blocks::is_kquant(t); }

#if defined(__x86_64__)
// A tile's Tile::prefetch lines, evenly over its `steps` calls of step() (a tile calls it
// once per step of its loop over k): into L1 (T0), as the T1 and T2 hints brought nothing
// nearer than DRAM on the Zen 5 (docs/benchmarks/history.md).
class SpreadPrefetch {
 public:
  SpreadPrefetch(const Tile& t, size_t steps)
      : at_(reinterpret_cast<const char*>(t.prefetch)), lines_(t.prefetch_lines), steps_(std::max<size_t>(steps, 1)) {}
  void step() {
    for (credit_ += lines_; credit_ >= steps_; credit_ -= steps_, at_ += 64) _mm_prefetch(at_, _MM_HINT_T0);
  }

 private:
  const char* at_;
  size_t lines_, steps_, credit_ = 0;
};
#endif

// The fixed reduction tree over sixteen lanes: i + (i+8), then + (i+4), + (i+2), + (i+1).
inline float reduce16(const float* l) {
  float a[8], b[4], c[2];
  for (int i = 0; i < 8; ++i) a[i] = l[i] + l[i + 8];
  for (int i = 0; i < 4; ++i) b[i] = a[i] + a[i + 4];
  for (int i = 0; i < 2; ++i) c[i] = b[i] + b[i + 2];
  return c[0] + c[1];
}

#if defined(__x86_64__)
// The same tree on registers (a tile's epilogue runs it once per output).
__attribute__((target("avx"))) inline float reduce16(__m256 lo, __m256 hi) {
  const __m256 a = _mm256_add_ps(lo, hi);                                               // l[i] + l[i+8]
  const __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));  // a[i] + a[i+4]
  const __m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));                                  // b[i] + b[i+2]
  return _mm_cvtss_f32(_mm_add_ss(c, _mm_movehdup_ps(c)));                              // c[0] + c[1]
}

// The AVX2 prefill tiles (f32, block formats, emulated bf16-dot) take up to kGridTokens
// tokens in groups of G and run over k in blocks, one half of the sixteen lanes per pass:
// prepare(c0, c1) for each block of chunks [c0, c1), then pass.template operator()<NT, H>
// (g, c0, c1) for each group g (NT tokens: G, or the fewer left at the end) and H = 0, 1.
inline constexpr size_t kGridTokens = 24;

template <int N, class F>
inline void with_group_size(size_t size, size_t g, F& halves) {
  if constexpr (N > 1)
    if (size < N) return with_group_size<N - 1>(size, g, halves);
  halves.template operator()<N>(g);
}

template <int G, class Prepare, class Pass>
inline void run_passes(size_t chunks, size_t block_chunks, size_t nt, Prepare&& prepare, Pass& pass) {
  for (size_t c0 = 0; c0 < chunks; c0 += block_chunks) {
    const size_t c1 = std::min(chunks, c0 + block_chunks);
    prepare(c0, c1);
    auto halves = [&]<int NT>(size_t g) {
      pass.template operator()<NT, 0>(g, c0, c1);
      pass.template operator()<NT, 1>(g, c0, c1);
    };
    for (size_t g = 0; g * G < nt; ++g) with_group_size<G>(nt - G * g, g, halves);
  }
}

// Their sums between passes ([group][half][row][token of the group]) and the outputs.
template <int NR, int G>
struct PassSums {
  __m256 lanes[kGridTokens / G][2][NR][G];
  __attribute__((target("avx"))) PassSums() {
    for (auto& group : lanes)
      for (auto& half : group)
        for (auto& row : half)
          for (__m256& lane : row) lane = _mm256_setzero_ps();
  }
  __attribute__((target("avx"))) void write(const Tile& t) const {
    for (size_t j = 0; j < t.nt; ++j)
      for (int r = 0; r < NR; ++r)
        t.y[(t.t0 + j) * t.w->rows + t.r0 + size_t(r)] = reduce16(lanes[j / G][0][r][j % G], lanes[j / G][1][r][j % G]);
  }
};

// While it lives, this thread's SSE/AVX arithmetic flushes subnormal results to zero
// (MXCSR bit 15) and reads subnormal inputs as zero (bit 6): the emulations of vdpbf16ps.
// Scope it to the lanes' steps: the final reduce16 tree is plain f32 (bf16_dot.h).
struct FlushSubnormals {
  unsigned saved = _mm_getcsr();
  FlushSubnormals() { _mm_setcsr(saved | 0x8040u); }
  ~FlushSubnormals() { _mm_setcsr(saved); }
};

LARQL_AVX512_TARGET("avx512f") inline float reduce16(__m512 v) {
  // Zero-masked extracts: GCC 12 implements the cast and the unmasked extract with an
  // undefined register and warns that it is read uninitialised.
  const __m256d lo = _mm512_maskz_extractf64x4_pd(0xff, _mm512_castps_pd(v), 0);
  const __m256d hi = _mm512_maskz_extractf64x4_pd(0xff, _mm512_castps_pd(v), 1);
  return reduce16(_mm256_castpd_ps(lo), _mm256_castpd_ps(hi));
}

// reduce16's tree over several accumulators at once: each level gathers lanes by shuffles
// (immediates: no index registers taken from the tile), then adds the same two values in
// the same order as reduce16 does for each accumulator. Named by the distance of the lanes
// added; p, q, r, s are accumulators, a, b, c the tree's levels.
namespace tree {
// x, y -> [x.a | y.a], a[i] = l[i] + l[i+8]
LARQL_AVX512_TARGET("avx512f") inline __m512 by8(__m512 x, __m512 y) {
  return _mm512_add_ps(_mm512_shuffle_f32x4(x, y, 0x44), _mm512_shuffle_f32x4(x, y, 0xee));
}
// [p.a | q.a], [r.a | s.a] -> [p.b | q.b | r.b | s.b], b[i] = a[i] + a[i+4]
LARQL_AVX512_TARGET("avx512f") inline __m512 by4(__m512 x, __m512 y) {
  return _mm512_add_ps(_mm512_shuffle_f32x4(x, y, 0x88), _mm512_shuffle_f32x4(x, y, 0xdd));
}
// Two of by4's results -> quarter m: [x's c0, c1 | y's c0, c1] of x's and y's m-th
// accumulators, c[i] = b[i] + b[i+2]
LARQL_AVX512_TARGET("avx512f") inline __m512 by2(__m512 x, __m512 y) {
  return _mm512_add_ps(_mm512_shuffle_ps(x, y, 0x44), _mm512_shuffle_ps(x, y, 0xee));
}
// Two of by2's results -> quarter m: the four sums c0 + c1 in the order of x's, then y's
LARQL_AVX512_TARGET("avx512f") inline __m512 by1(__m512 x, __m512 y) {
  return _mm512_add_ps(_mm512_shuffle_ps(x, y, 0x88), _mm512_shuffle_ps(x, y, 0xdd));
}
// Row r's four tokens: [token 0's b | 1's | 2's | 3's]
template <int NR>
LARQL_AVX512_TARGET("avx512f") inline __m512 row_b(const __m512 (&acc)[NR][4], int r) {
  return by4(by8(acc[r][0], acc[r][1]), by8(acc[r][2], acc[r][3]));
}
// Quarter j of v: token j's outputs (four rows, or two).
LARQL_AVX512_TARGET("avx512f") inline void store_quarters(__m512 v, float* y, size_t stride) {
  _mm_storeu_ps(y, _mm512_maskz_extractf32x4_ps(0xf, v, 0));
  _mm_storeu_ps(y + stride, _mm512_maskz_extractf32x4_ps(0xf, v, 1));
  _mm_storeu_ps(y + 2 * stride, _mm512_maskz_extractf32x4_ps(0xf, v, 2));
  _mm_storeu_ps(y + 3 * stride, _mm512_maskz_extractf32x4_ps(0xf, v, 3));
}
LARQL_AVX512_TARGET("avx512f") inline void store_quarters_low_halves(__m512 v, float* y, size_t stride) {
  _mm_storel_pi(reinterpret_cast<__m64*>(y), _mm512_maskz_extractf32x4_ps(0xf, v, 0));
  _mm_storel_pi(reinterpret_cast<__m64*>(y + stride), _mm512_maskz_extractf32x4_ps(0xf, v, 1));
  _mm_storel_pi(reinterpret_cast<__m64*>(y + 2 * stride), _mm512_maskz_extractf32x4_ps(0xf, v, 2));
  _mm_storel_pi(reinterpret_cast<__m64*>(y + 3 * stride), _mm512_maskz_extractf32x4_ps(0xf, v, 3));
}
}  // namespace tree

// A tile's outputs, y[j · stride + r] = reduce16(acc[r][j]). With four tokens, rows go
// four (then two) at a time through the tree above: about a third of the instructions of
// one reduce16 per output, and one store per token and group of rows.
template <int NR, int NT>
LARQL_AVX512_TARGET("avx512f") __attribute__((always_inline)) inline void store_reduced(const __m512 (&acc)[NR][NT], float* y,
                                                                                        size_t stride) {
  int r = 0;
  if constexpr (NT == 4) {
    for (; r + 4 <= NR; r += 4)
      tree::store_quarters(tree::by1(tree::by2(tree::row_b(acc, r), tree::row_b(acc, r + 1)),
                                     tree::by2(tree::row_b(acc, r + 2), tree::row_b(acc, r + 3))),
                           y + r, stride);
    if (r + 2 <= NR) {
      const __m512 c = tree::by2(tree::row_b(acc, r), tree::row_b(acc, r + 1));
      tree::store_quarters_low_halves(tree::by1(c, c), y + r, stride);
      r += 2;
    }
  }
  for (; r < NR; ++r)
    for (int j = 0; j < NT; ++j) y[size_t(j) * stride + size_t(r)] = reduce16(acc[r][j]);
}
#endif

// K-quant weights (kquant_dot.h's contract): the scalar oracle; the AVX2 tile (without and
// with AVX-VNNI), nr ≤ 4, nt ≤ kKquantTileTokens, which every x86 ISA's decode takes; and
// the AVX-512 prefill tile (with and without VNNI), nr, nt ≤ 4.
inline constexpr size_t kKquantTileTokens = 8;
void kquant_tile_scalar(const Tile& t);
#if defined(__x86_64__)
void kquant_tile_avx2(const Tile& t);
void kquant_tile_avx2_vnni(const Tile& t);
void kquant_tile_avx512_vnni(const Tile& t);
void kquant_tile_avx512bw(const Tile& t);
#endif

// A K-quant row as the AVX-512 prefill tile multiplies it: per super-block ten 64-byte
// slots, its integers by pairs of blocks (block 2p in the low half of slot p, 2p + 1 in
// the high), each pair's 16-bit pair-lane scales, the fold (q4_k/q5_k: m_0, m_0 .. m_7,
// m_7; q6_k: sc_0 .. sc_15; the upper half zero) and the floats d, dmin.
struct KquantRows {
  static constexpr size_t kIntegers = 0, kScales = 4, kFold = 8, kFloats = 9, kSuperBlockBytes = 640;
  static size_t bytes(size_t cols) { return cols / 256 * kSuperBlockBytes; }  // one row's
};

// bf16-dot arithmetic (bf16_dot.h): the scalar oracle; the emulations take the AVX2 f32
// tiles' limits (AVX2) and the AVX-512 block tiles' (AVX-512), the instruction's own up to
// 6 rows × 4 tokens.
void bf16dot_tile_scalar(const Tile& t);

// Row r of QuantizedActivations::quantize (block_dot.h's contract), its arrays sized: the
// scalar version and the AVX2 one, equal bit for bit.
void quantize_activation_row_scalar(const float* x, QuantizedActivations& qa, size_t r);

#if defined(__x86_64__)
void quantize_activation_row_avx2(const float* x, QuantizedActivations& qa, size_t r);
// 32 values rounded as bf16_dot.h's contract says (AVX2, and vcvtneps2bf16 itself); the
// caller pads a row's partial last chunk with zeros.
void round_activation_chunk_avx2(const float* x, uint16_t* out);
void round_activation_chunk_avx512bf16(const float* x, uint16_t* out);
void bf16dot_tile_avx2(const Tile& t);        // emulated
void bf16dot_tile_avx512(const Tile& t);      // emulated
void bf16dot_tile_avx512bf16(const Tile& t);  // vdpbf16ps
void tile_avx2(const Tile& t);    // nr ≤ 4, nt ≤ 24
void tile_avx512(const Tile& t);  // nr ≤ 8 with nt = 1, else nr ≤ 6, nt ≤ 4
// Block-format weights (block_dot.h's contract).
void block_tile_avx2(const Tile& t);      // nr ≤ 4, nt ≤ 24
void block_tile_avx2_vnni(const Tile& t); // the same with AVX-VNNI
void block_tile_vnni(const Tile& t);      // AVX-512 VNNI: nr ≤ 8 with nt = 1, else nr, nt ≤ 4
void block_tile_avx512bw(const Tile& t);  // AVX-512 without VNNI: the same limits
#endif

}  // namespace larql
