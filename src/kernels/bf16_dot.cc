#include "kernels/bf16_dot.h"

#include <algorithm>

#include "kernels/matvec_tiles.h"

namespace larql {
namespace bf16dot {

void RoundedActivations::round(const float* x, size_t tokens, size_t cols) {
  tokens_ = tokens;
  chunks_ = padded(cols) / kChunk;
  values_.resize(tokens * chunks_ * kChunk);
  for (size_t t = 0; t < tokens; ++t)
    for (size_t c = 0; c < chunks_; ++c) {
      uint16_t* o = const_cast<uint16_t*>(chunk(t, c));
      const size_t n = std::min(kChunk, cols - std::min(cols, c * kChunk));
      for (size_t i = 0; i < n; ++i) o[i] = round_activation(x[t * cols + c * kChunk + i]);
      std::fill(o + n, o + kChunk, uint16_t{0});
    }
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
