#include "kernels/bf16_dot.h"

#include <algorithm>

#include "kernels/matvec_tiles.h"

namespace larql {
namespace bf16dot {

void round_activations(const float* x, size_t rows, size_t cols, uint16_t* out) {
  const size_t stride = padded(cols);
  for (size_t r = 0; r < rows; ++r) {
    uint16_t* o = out + r * stride;
    for (size_t k = 0; k < cols; ++k) o[k] = round_activation(x[r * cols + k]);
    std::fill(o + cols, o + stride, uint16_t{0});
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
      const uint16_t* x = t.xb + (t.t0 + j) * stride;
      float lanes[16] = {};
      for (size_t k = 0; k < stride; k += bf16dot::kChunk) {
        for (size_t i = 0; i < bf16dot::kChunk; ++i) w[i] = k + i < cols ? row[k + i] : 0;
        bf16dot::chunk_scalar(w, x + k, lanes);
      }
      t.y[(t.t0 + j) * t.w->rows + t.r0 + r] = reduce16(lanes);
    }
  }
}

}  // namespace larql
