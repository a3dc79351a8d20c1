// The rows of a q or k projection in either RoPE layout (model.h): a head's adjacent pair
// (2i, 2i+1) is its half-split pair (i, i + head_dim/2). llama2.c and llama.cpp's GGUF
// files store the adjacent order, Hugging Face checkpoints the half-split one.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

#include "model/model.h"

namespace larql {

// `rows` ([heads · head_dim][cols], in the other layout) reordered into layout `to`.
inline std::vector<float> reorder_rope_rows(const std::vector<float>& rows, size_t heads, size_t head_dim, size_t cols,
                                            RopeLayout to) {
  std::vector<float> out(rows.size());
  const size_t half = head_dim / 2;
  for (size_t h = 0; h < heads; ++h)
    for (size_t i = 0; i < half; ++i)
      for (size_t j = 0; j < 2; ++j) {
        const size_t adjacent = h * head_dim + 2 * i + j, split = h * head_dim + j * half + i;
        const size_t from = to == RopeLayout::adjacent_pairs ? split : adjacent;
        const size_t into = to == RopeLayout::adjacent_pairs ? adjacent : split;
        std::copy_n(&rows[from * cols], cols, &out[into * cols]);
      }
  return out;
}

}  // namespace larql
