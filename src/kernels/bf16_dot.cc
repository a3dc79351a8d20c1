#include "kernels/bf16_dot.h"

#include <algorithm>

#include "kernels/matvec.h"
#include "kernels/matvec_tiles.h"
#include "kernels/thread_pool.h"

namespace larql {
namespace bf16dot {

void RoundedActivations::round(const float* x, size_t tokens, size_t cols, MatmulIsa isa, ThreadPool& pool) {
  tokens_ = tokens;
  chunks_ = padded(cols) / kChunk;
  values_.resize(tokens * chunks_ * kChunk);
  auto scalar = [](const float* from, uint16_t* to) {
    for (size_t i = 0; i < kChunk; ++i) to[i] = round_activation(from[i]);
  };
#if defined(__x86_64__)
  void (*round_chunk)(const float*, uint16_t*) = isa == MatmulIsa::avx512bf16 ? round_activation_chunk_avx512bf16
                                                 : isa != MatmulIsa::scalar    ? round_activation_chunk_avx2
                                                                               : +scalar;
#else
  (void)isa;
  void (*round_chunk)(const float*, uint16_t*) = +scalar;
#endif
  const size_t full = cols / kChunk;  // a row's chunks of 32 values; a partial last one is padded here
  auto round_tokens = [&](size_t begin, size_t end) {
    for (size_t t = begin; t < end; ++t) {
      for (size_t c = 0; c < full; ++c) round_chunk(x + t * cols + c * kChunk, values_.data() + offset(t, c));
      if (full < chunks_) {  // zeros round to zeros: the padding
        float tail[kChunk] = {};
        std::copy(x + t * cols + full * kChunk, x + (t + 1) * cols, tail);
        round_chunk(tail, values_.data() + offset(t, full));
      }
    }
  };
  pool.parallel_rows(tokens, cols, round_tokens);
}

}  // namespace bf16dot

// The scalar oracle of the contract.
void bf16dot_tile_scalar(const Tile& t) {
  const size_t cols = t.w->cols, stride = bf16dot::padded(cols);
  uint16_t w[bf16dot::kChunk];
  for (size_t r = 0; r < t.nr; ++r) {
    const auto* row = reinterpret_cast<const uint16_t*>(t.w->row_ptr(t.r0 + r));
    for (size_t j = 0; j < t.nt; ++j) {
      float lanes[16] = {};
      for (size_t k = 0; k < stride; k += bf16dot::kChunk) {
        for (size_t i = 0; i < bf16dot::kChunk; ++i) w[i] = k + i < cols ? row[k + i] : 0;
        bf16dot::chunk_scalar(w, t.xb->chunk(t.t0 + j, k / bf16dot::kChunk), lanes);
      }
      t.y[(t.t0 + j) * t.w->rows + t.r0 + r] = reduce16(lanes);
    }
  }
}

}  // namespace larql
