// The "bf16-dot" arithmetic for bf16 weights: activations rounded to bf16, products
// summed as AVX512_BF16's vdpbf16ps sums them. Twice the multiply-adds per instruction of
// f32 FMA, at the price of the activations' bf16 rounding; the default "f32" arithmetic
// (matvec.h) keeps the activations exact. The contract, which the hardware instruction,
// its AVX-512 and AVX2 emulations and the scalar oracle all follow bit for bit:
//
//   activations: each value rounded to bf16, nearest even; a subnormal becomes a zero of
//                its sign, a NaN stays NaN (quiet): vcvtneps2bf16
//   lanes:       sixteen f32 lanes; element k of the row belongs to chunk c = k / 32 and
//                lane i = (k mod 32) / 2; the row is zero-padded to a multiple of 32.
//                For each chunk in order, lane i takes its odd element, then its even one:
//                   lane = ftz(fma(w[32c+2i+1], x[32c+2i+1], lane))
//                   lane = ftz(fma(w[32c+2i],   x[32c+2i],   lane))
//                with subnormal weights read as zero (daz) and ftz flushing a subnormal
//                result to a zero of its sign (bf16 products are exact in f32, so each
//                step is one rounding, to nearest even)
//   result:      the sixteen lanes reduced by matvec_tiles.h's fixed tree, plain f32 adds
//                (a subnormal sum stays subnormal: only the lanes' steps flush)
//
// As for the f32 arithmetic, y[t][r] depends only on the row and the token: not on the
// ISA, the thread count or the tile. A client and a shard agree when both use the same
// arithmetic; /v1/stats names it (ffn_arithmetic).
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace larql {
class ThreadPool;
enum class MatmulIsa;
}

namespace larql::bf16dot {

// An activation as the contract rounds it.
inline uint16_t round_activation(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40);  // NaN, quieted
  if ((x & 0x7f800000u) == 0) return static_cast<uint16_t>((x >> 16) & 0x8000);         // zero or subnormal
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

// Values per chunk (one vdpbf16ps over a zmm) and the padded length of a row of n.
inline constexpr size_t kChunk = 32;
inline constexpr size_t padded(size_t n) { return (n + kChunk - 1) / kChunk * kChunk; }

// Activations rounded for the contract, each token padded with zeros to padded(cols), as
// the tiles read them: the tokens in groups of kTokenGroup (the last group may hold
// fewer), and within a group chunk by chunk, each token's 32 values in turn. A tile of a
// group's tokens then reads one stream; tokens laid out one after another, a multiple of
// 4 KiB apart in the usual shapes, put all their chunks in one L1 set (a 2048 x 5632
// product of 128 tokens ran 1.2x slower so).
inline constexpr size_t kTokenGroup = 4;

class RoundedActivations {
 public:
  // Rounded by the given implementation (all give the same bits: vcvtneps2bf16 where the
  // ISA has AVX512_BF16, AVX2 for AVX2 and AVX-512, else scalar); many tokens are spread
  // over the pool.
  void round(const float* x, size_t tokens, size_t cols, MatmulIsa isa, ThreadPool& pool);
  // Token t's chunk c (32 values), and the distance from one of its chunks to the next.
  const uint16_t* chunk(size_t t, size_t c) const { return values_.data() + offset(t, c); }
  size_t chunk_step(size_t t) const { return group_size(t) * kChunk; }

 private:
  size_t group_size(size_t t) const { return std::min(kTokenGroup, tokens_ - t / kTokenGroup * kTokenGroup); }
  size_t offset(size_t t, size_t c) const {
    const size_t first = t / kTokenGroup * kTokenGroup;
    return first * chunks_ * kChunk + (c * group_size(t) + t - first) * kChunk;
  }
  std::vector<uint16_t> values_;
  size_t tokens_ = 0, chunks_ = 0;
};

// The scalar oracle's pieces, also used by tests.
inline float flush_subnormal(float v) { return std::fpclassify(v) == FP_SUBNORMAL ? std::copysign(0.0f, v) : v; }
inline float widen(uint16_t v) { return flush_subnormal(std::bit_cast<float>(uint32_t{v} << 16)); }

// Lanes after one chunk: lanes[i] takes w[2i+1]·x[2i+1], then w[2i]·x[2i].
inline void chunk_scalar(const uint16_t* w, const uint16_t* x, float* lanes) {
  for (size_t i = 0; i < 16; ++i) {
    lanes[i] = flush_subnormal(std::fma(widen(w[2 * i + 1]), widen(x[2 * i + 1]), lanes[i]));
    lanes[i] = flush_subnormal(std::fma(widen(w[2 * i]), widen(x[2 * i]), lanes[i]));
  }
}

}  // namespace larql::bf16dot
