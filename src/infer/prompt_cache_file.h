// `larql run --prompt-cache FILE`: a sequence's keys and values kept in a file for the next
// run of the same prefix (as llama.cpp's --prompt-cache). The file names what the values
// depend on: the model (kv_fingerprint), the arithmetic of its products, and the cache's
// layout; a file that differs in any of them, or whose lengths do not add up, is refused,
// naming what differs, and never loaded in part.
//
// Layout: "LARQLKV1", u32 header length, the header (JSON: version, fingerprint,
// arithmetic, key_block, tokens, per layer {first, kv_heads, head_dim,
// key_floats, value_floats}), then per layer and head its keys, then its values (f32).
#pragma once

#include <span>
#include <string>
#include <vector>

#include "base/errors.h"
#include "infer/kv_cache.h"
#include "model/model.h"

namespace larql {

struct PromptCache {
  std::vector<int> tokens;  // whose keys and values `cache` holds, from position 0
  KvCache cache;
};

// Writes `cache`'s first tokens.size() positions (written to a temporary file, then renamed).
Status save_prompt_cache(const std::string& path, const Model& model, std::span<const int> tokens, const KvCache& cache);
Result<PromptCache> load_prompt_cache(const std::string& path, const Model& model);

}  // namespace larql
