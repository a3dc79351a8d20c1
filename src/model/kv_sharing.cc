#include "model/kv_sharing.h"

#include <string>

namespace larql {

Status share_kv_of_last_layers(ModelConfig& c, size_t shared) {
  if (shared == 0) return Ok{};
  const size_t layers = c.layer_configs.size();
  if (shared >= layers)
    return make_error(ErrorCode::invalid_argument, "the KV-shared layers (" + std::to_string(shared) +
                                                       ") must leave at least one of the " + std::to_string(layers) +
                                                       " layers with a KV cache of its own");
  const size_t first = layers - shared;
  for (size_t l = first; l < layers; ++l) {
    LayerConfig& lc = c.layer_configs[l];
    size_t source = first;
    while (source > 0 && c.layer_configs[source - 1].attention != lc.attention) --source;
    if (source == 0)
      return make_error(ErrorCode::invalid_argument,
                        "KV-shared layer " + std::to_string(l) + " is a " +
                            (lc.attention == AttentionKind::sliding ? "sliding" : "full") +
                            "-attention layer, but no layer before the shared ones (0.." + std::to_string(first - 1) +
                            ") is one whose keys and values it could read");
    const LayerConfig& from = c.layer_configs[source - 1];
    if (from.head_dim != lc.head_dim || from.kv_heads != lc.kv_heads)
      return make_error(ErrorCode::invalid_argument, "KV-shared layer " + std::to_string(l) + " has heads of " +
                                                         std::to_string(lc.head_dim) + " and " + std::to_string(lc.kv_heads) +
                                                         " KV heads, but layer " + std::to_string(source - 1) +
                                                         ", whose cache it reads, has " + std::to_string(from.head_dim) +
                                                         " and " + std::to_string(from.kv_heads));
    lc.kv_from = source - 1;
  }
  return Ok{};
}

void widen_kv_shared_ffn(ModelConfig& c) {
  for (size_t l = 0; l < c.layer_configs.size(); ++l)
    if (!c.owns_kv(l)) c.layer_configs[l].ffn = 2 * c.ffn;
}

Status check_range_keeps_kv_groups(const ModelConfig& c, size_t first, size_t last) {
  auto inside = [&](size_t l) { return l >= first && l <= last; };
  for (size_t l = 0; l < c.layers; ++l)
    if (const auto& from = c.layer(l).kv_from; from && inside(l) != inside(*from))
      return make_error(ErrorCode::invalid_argument,
                        "layers " + std::to_string(first) + "-" + std::to_string(last) + " split a KV-sharing group: layer " +
                            std::to_string(l) + " reads layer " + std::to_string(*from) +
                            "'s cache, so both must be in the same range");
  return Ok{};
}

}  // namespace larql
