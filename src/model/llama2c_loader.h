// llama2.c checkpoints (Karpathy's run.c format): a header of seven int32 (dim,
// hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size — negative when a separate
// classifier follows — and seq_len), then f32 tensors in run.c's order.
#pragma once

#include <string>

#include "base/errors.h"
#include "model/model.h"

namespace larql {

Result<Model> load_llama2c(const std::string& path);

}  // namespace larql
