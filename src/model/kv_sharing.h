// Gemma 4's E models share KV caches across layers: the last layers compute only their
// queries and attend over an earlier layer's keys and values (gemma-architecture.md §6).
#pragma once

#include "base/errors.h"
#include "model/model.h"

namespace larql {

// Makes the last `shared` layers of c KV-shared, each reading the cache of the last earlier
// layer of its attention kind (transformers' kv_shared_layer_index; llama.cpp hard-codes the
// released models' case of it). Needs c.layer_configs set; refuses a count that leaves a kind
// with no earlier layer to read, naming it.
Status share_kv_of_last_layers(ModelConfig& c, size_t shared);

// E2B's use_double_wide_mlp: the KV-shared layers' FFN twice the model's width.
void widen_kv_shared_ffn(ModelConfig& c);

// Whether layers first…last keep every KV-sharing group whole (a layer reading another's
// cache in the same range as that layer, PROTOCOL §13); the error names the split pair.
Status check_range_keeps_kv_groups(const ModelConfig& c, size_t first, size_t last);

}  // namespace larql
