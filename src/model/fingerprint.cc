#include "model/fingerprint.h"

#include "model/weight_reader.h"

#include <openssl/evp.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace larql {

namespace {

using NamedTensors = std::vector<std::pair<std::string, const Matrix*>>;

void add_experts(NamedTensors& tensors, const LayerWeights& w, size_t first, size_t last) {
  for (size_t e = first; e <= last && e < w.experts.size(); ++e)
    for (const auto& [role, m] : {std::pair{"gate", &w.experts[e].gate}, {"up", &w.experts[e].up}, {"down", &w.experts[e].down}})
      tensors.emplace_back("expert" + std::to_string(e) + "." + role, m);
}

std::string hex16(const unsigned char* digest) {
  char hex[17];
  for (int i = 0; i < 8; ++i) std::snprintf(hex + 2 * i, 3, "%02x", digest[i]);
  return std::string(hex, 16);
}

// 16 hex digits of SHA-256 over each tensor's name, dtype, shape and first and last 4 KiB,
// read with pread (weight_reader.h): a shard fingerprints experts it does not own.
std::string fingerprint(const Model& model, const NamedTensors& tensors) {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr);
  WeightReader reader(model);
  std::vector<uint8_t> edge_bytes(4096);
  for (const auto& [name, m] : tensors) {
    const std::string header = name + ":" + std::string(dtype_name(m->dtype)) + ":" + std::to_string(m->rows) + "x" +
                               std::to_string(m->cols) + ";";
    EVP_DigestUpdate(ctx, header.data(), header.size());
    if (!m->data) continue;
    const auto* data = static_cast<const uint8_t*>(m->data);
    const size_t bytes = m->bytes(), edge = std::min<size_t>(bytes, 4096);
    for (const uint8_t* from : {data, data + bytes - edge}) {
      reader.read(from, edge, edge_bytes.data());
      EVP_DigestUpdate(ctx, edge_bytes.data(), edge);
    }
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_DigestFinal_ex(ctx, digest, &length);
  EVP_MD_CTX_free(ctx);
  return hex16(digest);
}

}  // namespace

std::string layer_fingerprint(const Model& model, size_t layer) {
  const LayerWeights& w = model.layers.at(layer);
  // A dense FFN's gate, up and down; a sparse layer's router and its experts' matrices (Gemma 4: both).
  NamedTensors tensors;
  if (w.gate.data || w.experts.empty()) tensors = {{"gate", &w.gate}, {"up", &w.up}, {"down", &w.down}};
  if (!w.experts.empty()) tensors.emplace_back("router", &w.router);
  add_experts(tensors, w, 0, w.experts.size() - 1);
  return fingerprint(model, tensors);
}

std::string expert_fingerprint(const Model& model, size_t layer, size_t first, size_t last) {
  NamedTensors tensors;
  add_experts(tensors, model.layers.at(layer), first, last);
  return fingerprint(model, tensors);
}

std::string layer_session_fingerprint(const Model& model, size_t layer) {
  const LayerWeights& w = model.layers.at(layer);
  NamedTensors tensors{
      {"attn_norm", &w.attn_norm},     {"wq", &w.wq},
      {"wk", &w.wk},                   {"wv", &w.wv},
      {"wo", &w.wo},                   {"bq", &w.bq},
      {"bk", &w.bk},                   {"bv", &w.bv},
      {"bo", &w.bo},                   {"sinks", &w.sinks},
      {"q_norm", &w.q_norm},           {"k_norm", &w.k_norm},
      {"attn_out_norm", &w.attn_out_norm}, {"ffn_norm", &w.ffn_norm},
      {"gate", &w.gate},               {"up", &w.up},
      {"down", &w.down},               {"ffn_out_norm", &w.ffn_out_norm},
      {"output_scale", &w.output_scale}, {"router", &w.router},
      {"router_bias", &w.router_bias}, {"router_scale", &w.router_scale},
      {"expert_scale", &w.expert_scale}, {"expert_norm", &w.expert_norm},
      {"dense_out_norm", &w.dense_out_norm}, {"expert_out_norm", &w.expert_out_norm},
      {"shared_expert_gate", &w.shared_expert_gate}, {"ple_gate", &w.ple_gate},
      {"ple_proj", &w.ple_proj},       {"ple_post_norm", &w.ple_post_norm},
  };
  if (!w.experts.empty()) add_experts(tensors, w, 0, w.experts.size() - 1);
  for (size_t e = 0; e < w.experts.size(); ++e)
    for (const auto& [role, m] : {std::pair{"gate_bias", &w.experts[e].gate_bias}, {"up_bias", &w.experts[e].up_bias},
                                  {"down_bias", &w.experts[e].down_bias}})
      tensors.emplace_back("expert" + std::to_string(e) + "." + role, m);
  return fingerprint(model, tensors);
}

std::string session_config_fingerprint(const ModelConfig& c, size_t first, size_t last) {
  using nlohmann::json;
  json layers = json::array();
  for (size_t l = first; l <= last && l < c.layer_configs.size(); ++l) {
    const LayerConfig& lc = c.layer(l);
    json rope{{"theta", lc.rope.theta}, {"linear_factor", lc.rope.linear_factor}, {"rotated_pairs", lc.rope.rotated_pairs},
              {"freq_factors", lc.rope.freq_factors}};
    if (lc.rope.llama3)
      rope["llama3"] = {lc.rope.llama3->factor, lc.rope.llama3->low_freq_factor, lc.rope.llama3->high_freq_factor,
                        lc.rope.llama3->original_max_position};
    if (lc.rope.yarn)
      rope["yarn"] = {lc.rope.yarn->factor, lc.rope.yarn->original_max_position, lc.rope.yarn->beta_fast,
                      lc.rope.yarn->beta_slow, lc.rope.yarn->truncate, lc.rope.yarn->attention_factor};
    layers.push_back({{"layer", l}, {"attention", int(lc.attention)}, {"window", lc.window}, {"rope", rope},
                      {"head_dim", lc.head_dim}, {"kv_heads", lc.kv_heads}, {"values_are_keys", lc.values_are_keys},
                      {"sparse", lc.sparse}, {"ffn", c.ffn_width(l)}, {"kv_from", lc.kv_from ? long(*lc.kv_from) : -1}});
  }
  const json doc{{"layers", layers},
                 {"hidden", c.hidden}, {"heads", c.heads}, {"norm_eps", c.norm_eps},
                 {"norm_weight_offset", c.norm_weight_offset}, {"norm_placement", int(c.norm_placement)},
                 {"rope_layout", int(c.rope_layout)}, {"activation", int(c.activation)},
                 {"embedding_scale", c.embedding_scale}, {"attention_scale", c.attention_scale},
                 {"attention_softcap", c.attention_softcap}, {"value_norm", c.value_norm}, {"layer_scalar", c.layer_scalar},
                 {"qk_norm", c.qk_norm}, {"attention_bias", c.attention_bias}, {"attention_sinks", c.attention_sinks},
                 {"swiglu_limit", c.swiglu_limit},
                 {"moe", {c.moe.experts, c.moe.experts_used, c.moe.expert_ffn, int(c.moe.weights), c.moe.beside_dense,
                          c.moe.shared_experts, c.moe.shared_expert_ffn}},
                 {"ple", {c.ple_dim, c.ple_vocab, c.ple_scale}}};
  const std::string text = doc.dump();  // keys sorted: canonical
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_Digest(text.data(), text.size(), digest, &length, EVP_sha256(), nullptr);
  return hex16(digest);
}

std::string session_globals_fingerprint(const Model& model) {
  NamedTensors tensors{{"rope_freqs", &model.rope_freqs}};
  if (model.config.ple_dim)
    tensors.insert(tensors.end(), {{"embed", &model.embed}, {"ple_embed", &model.ple_embed},
                                   {"ple_model_proj", &model.ple_model_proj}, {"ple_proj_norm", &model.ple_proj_norm}});
  return fingerprint(model, tensors);
}

std::string kv_fingerprint(const Model& model) {
  const ModelConfig& c = model.config;
  std::string parts = fingerprint(model, {{"embed", &model.embed}}) + session_globals_fingerprint(model) +
                      (c.layers ? session_config_fingerprint(c, 0, c.layers - 1) : std::string());
  for (size_t l = 0; l < c.layers; ++l) parts += layer_session_fingerprint(model, l);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_Digest(parts.data(), parts.size(), digest, &length, EVP_sha256(), nullptr);
  return hex16(digest);
}

}  // namespace larql
