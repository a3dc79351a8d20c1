#include "infer/prompt_cache_file.h"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "kernels/attention.h"
#include "kernels/dtype.h"
#include "model/fingerprint.h"

namespace larql {

namespace {

using nlohmann::json;

constexpr char kMagic[8] = {'L', 'A', 'R', 'Q', 'L', 'K', 'V', '1'};
constexpr uint32_t kVersion = 1;

std::string arithmetic_of(const Model& model) {
  return model.layers_arithmetic(0, model.config.layers ? model.config.layers - 1 : 0).name();
}

Error refused(const std::string& path, const std::string& why) {
  return make_error(ErrorCode::invalid_argument, "--prompt-cache " + path + ": " + why + "; not loaded (delete it to start afresh)");
}

}  // namespace

Status save_prompt_cache(const std::string& path, const Model& model, std::span<const int> tokens, const KvCache& cache) {
  const ModelConfig& c = model.config;
  const KvCache kept = copy_kv_prefix(c, cache, tokens.size());
  json layers = json::array();
  for (size_t l = 0; l < c.layers; ++l) {
    const KvCache::Layer* layer = l < kept.layers.size() ? &kept.layers[l] : nullptr;
    const size_t heads = layer ? layer->keys.size() : 0;
    layers.push_back({{"first", layer ? layer->first : 0},
                      {"kv_heads", heads},
                      {"head_dim", c.layer(l).head_dim},
                      {"key_floats", heads ? layer->keys[0].size() : 0},
                      {"value_floats", heads ? layer->values[0].size() : 0}});
  }
  const std::string header = json{{"version", kVersion},
                                  {"fingerprint", kv_fingerprint(model)},
                                  {"arithmetic", arithmetic_of(model)},
                                  {"key_block", kKeyBlock},
                                  {"tokens", tokens},
                                  {"layers", layers}}
                                 .dump();
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out) return make_error(ErrorCode::invalid_argument, "--prompt-cache " + path + ": cannot write " + temporary);
    const uint32_t header_bytes = uint32_t(header.size());
    out.write(kMagic, sizeof kMagic);
    out.write(reinterpret_cast<const char*>(&header_bytes), sizeof header_bytes);
    out.write(header.data(), std::streamsize(header.size()));
    for (const KvCache::Layer& layer : kept.layers)
      for (size_t h = 0; h < layer.keys.size(); ++h)
        for (const auto* v : {&layer.keys[h], &layer.values[h]})
          out.write(reinterpret_cast<const char*>(v->data()), std::streamsize(v->size() * sizeof(float)));
    if (!out.flush()) return make_error(ErrorCode::invalid_argument, "--prompt-cache " + path + ": writing " + temporary + " failed");
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0)
    return make_error(ErrorCode::invalid_argument, "--prompt-cache " + path + ": cannot rename " + temporary + " to it");
  return Ok{};
}

Result<PromptCache> load_prompt_cache(const std::string& path, const Model& model) {
  const ModelConfig& c = model.config;
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(ErrorCode::invalid_argument, "--prompt-cache " + path + ": cannot read it");
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  uint32_t header_bytes = 0;
  if (bytes.size() < sizeof kMagic + sizeof header_bytes || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0)
    return refused(path, "not a larql prompt cache (it does not begin with LARQLKV1)");
  std::memcpy(&header_bytes, bytes.data() + sizeof kMagic, sizeof header_bytes);
  const size_t values_at = sizeof kMagic + sizeof header_bytes + size_t(header_bytes);
  if (values_at > bytes.size()) return refused(path, "truncated: its header says " + std::to_string(header_bytes) + " bytes");
  const json h = json::parse(bytes.begin() + sizeof kMagic + sizeof header_bytes, bytes.begin() + long(values_at), nullptr, false);
  auto is_count = [](const json& j, const char* key) { return j.contains(key) && j[key].is_number_unsigned(); };
  if (!h.is_object() || !is_count(h, "version") || !h.contains("fingerprint") || !h["fingerprint"].is_string() ||
      !h.contains("arithmetic") || !h["arithmetic"].is_string() || !is_count(h, "key_block") || !h.contains("tokens") ||
      !h["tokens"].is_array() || !h.contains("layers") || !h["layers"].is_array())
    return refused(path, "its header is not the JSON this larql writes");
  if (h["version"] != kVersion)
    return refused(path, "version " + h["version"].dump() + "; this larql reads version " + std::to_string(kVersion));
  if (const std::string fp = kv_fingerprint(model); h["fingerprint"] != fp)
    return refused(path, "written for another model (fingerprint " + h["fingerprint"].get<std::string>() + ", this model's " + fp + ")");
  if (const std::string a = arithmetic_of(model); h["arithmetic"] != a)
    return refused(path, "written with the '" + h["arithmetic"].get<std::string>() + "' arithmetic, this run computes '" + a +
                             "' (--arithmetic, and the weights' block formats)");
  if (h["key_block"] != kKeyBlock) return refused(path, "keys in blocks of " + h["key_block"].dump() + ", not " + std::to_string(kKeyBlock));
  PromptCache out;
  for (const json& t : h["tokens"]) {
    if (!t.is_number_unsigned() || t.get<uint64_t>() >= c.vocab)
      return refused(path, "token " + t.dump() + " is not an id of this vocabulary (0.." + std::to_string(c.vocab - 1) + ")");
    out.tokens.push_back(int(t.get<uint64_t>()));
  }
  if (out.tokens.empty() || out.tokens.size() > c.context)
    return refused(path, std::to_string(out.tokens.size()) + " tokens, not 1.." + std::to_string(c.context));
  const json& layers = h["layers"];
  if (layers.size() != c.layers) return refused(path, std::to_string(layers.size()) + " layers, this model has " + std::to_string(c.layers));
  // Every length checked against the model and the tokens, and their sum against the file,
  // before a value is read.
  size_t floats = 0;
  out.cache.layers.resize(c.layers);
  for (size_t l = 0; l < c.layers; ++l) {
    const json& j = layers[l];
    const std::string where = "layer " + std::to_string(l);
    if (!j.is_object() || !is_count(j, "first") || !is_count(j, "kv_heads") || !is_count(j, "head_dim") || !is_count(j, "key_floats") ||
        !is_count(j, "value_floats"))
      return refused(path, where + ": its entry is not the JSON this larql writes");
    const size_t first = j["first"], heads = j["kv_heads"], hd = j["head_dim"];
    const LayerConfig& lc = c.layer(l);
    if (hd != lc.head_dim || (heads != 0 && heads != lc.kv_heads))
      return refused(path, where + ": " + std::to_string(heads) + " key-value heads of " + std::to_string(hd) + ", this model's are " +
                               std::to_string(lc.kv_heads) + " of " + std::to_string(lc.head_dim));
    if (first % kKeyBlock != 0 || first > out.tokens.size())
      return refused(path, where + ": first position " + std::to_string(first) + " is not a key block within its tokens");
    const size_t slots = out.tokens.size() - first;
    if (heads && (j["key_floats"] != key_floats(slots, hd) || j["value_floats"] != slots * hd))
      return refused(path, where + ": its lengths do not fit " + std::to_string(slots) + " positions");
    if (!heads && (j["key_floats"] != 0 || j["value_floats"] != 0)) return refused(path, where + ": values without heads");
    out.cache.layers[l].first = first;
    out.cache.layers[l].keys.assign(heads, std::vector<float>(heads ? key_floats(slots, hd) : 0));
    out.cache.layers[l].values.assign(heads, std::vector<float>(slots * hd));
    floats += heads * (key_floats(slots, hd) + slots * hd);
  }
  if (bytes.size() - values_at != floats * sizeof(float))
    return refused(path, "truncated or with bytes to spare: " + std::to_string(bytes.size() - values_at) + " bytes of values, its header says " +
                             std::to_string(floats * sizeof(float)));
  const char* at = bytes.data() + values_at;
  for (KvCache::Layer& layer : out.cache.layers)
    for (size_t h = 0; h < layer.keys.size(); ++h)
      for (auto* v : {&layer.keys[h], &layer.values[h]}) {
        std::memcpy(v->data(), at, v->size() * sizeof(float));
        at += v->size() * sizeof(float);
      }
  return out;
}

}  // namespace larql
