#include "plan/model_sizes.h"

#include "kernels/attention.h"

#include <filesystem>
#include <numeric>
#include <regex>

#include "infer/kv_cache.h"
#include "model/gguf.h"
#include "model/gguf_loader.h"
#include "model/hf_loader.h"
#include "model/safetensors.h"

namespace larql {

uint64_t ModelSizes::kv_bytes(size_t positions, size_t pass_rows) const {
  uint64_t bytes = 0;
  for (const auto& [window, per_position] : kv_layers) bytes += kv_positions_held(window, positions, pass_rows) * per_position;
  return bytes;
}

uint64_t ModelSizes::kv_bytes(size_t positions, size_t pass_rows, size_t first, size_t last) const {
  uint64_t bytes = 0;
  // In whole key blocks, as a session's cache reserves them (kv_capacity_positions).
  for (size_t l = first; l <= last && l < kv_of_layer.size(); ++l)
    bytes += key_floats(kv_positions_held(kv_of_layer[l].first, positions, pass_rows), 1) * kv_of_layer[l].second;
  return bytes;
}

uint64_t ModelSizes::layer_bytes(size_t first, size_t last) const {
  uint64_t bytes = 0;
  for (size_t l = first; l <= last && l < layers; ++l) bytes += dense_ffn[l] + expert_ffn[l] + layer_rest[l];
  return bytes;
}

uint64_t ModelSizes::ffn_total() const {
  return std::accumulate(dense_ffn.begin(), dense_ffn.end(), uint64_t{0}) +
         std::accumulate(expert_ffn.begin(), expert_ffn.end(), uint64_t{0});
}

TensorPlace place_tensor(const std::string& name) {
  // Hugging Face: "...layers.N.mlp.down_proj.weight"; GGUF: "blk.N.ffn_down.weight".
  static const std::regex hf(R"((?:^|\.)layers\.(\d+)\.(.*)$)"), gguf(R"(^blk\.(\d+)\.(.*)$)");
  std::smatch m;
  const bool is_gguf = std::regex_match(name, m, gguf);
  if (!is_gguf && !std::regex_search(name, m, hf)) return {};
  const size_t layer = std::stoul(m[1].str());
  const std::string rest = m[2].str();
  const TensorPlace client{TensorPart::client, layer, true};
  if (rest.find("norm") != std::string::npos) return client;  // the client applies every norm
  if (is_gguf) {
    if (rest.rfind("ffn_", 0) != 0 || rest.rfind("ffn_gate_inp", 0) == 0) return client;  // attention, the router
    const bool expert = rest.find("_exps") != std::string::npos || rest.find("_shexp") != std::string::npos;
    return {expert ? TensorPart::experts : TensorPart::dense_ffn, layer};
  }
  const bool ffn = rest.rfind("mlp.", 0) == 0 || rest.rfind("block_sparse_moe.", 0) == 0 || rest.rfind("feed_forward.", 0) == 0 ||
                   rest.rfind("experts.", 0) == 0 || rest.rfind("moe.", 0) == 0;
  if (!ffn) return client;
  // Routers stay with the client: Mixtral's and Qwen-MoE's "gate", GPT-OSS's and Gemma 4's "router".
  if (rest.find("router") != std::string::npos || rest.ends_with(".gate.weight") || rest.find("shared_expert_gate") != std::string::npos)
    return client;
  // A shared expert (Qwen2-MoE's) is an expert too: ids after the routed ones (PROTOCOL §12).
  const bool expert = rest.find("experts") != std::string::npos || rest.find("shared_expert") != std::string::npos;
  return {expert ? TensorPart::experts : TensorPart::dense_ffn, layer};
}

namespace {

Status add_tensor(ModelSizes& s, const std::string& name, uint64_t bytes, const std::string& source) {
  const TensorPlace place = place_tensor(name);
  if (place.layer >= s.layers && (place.part != TensorPart::client || place.in_layer))
    return make_error(ErrorCode::invalid_argument, source + ": tensor " + name + " names layer " + std::to_string(place.layer) +
                                                       "; the model has " + std::to_string(s.layers));
  if (place.part == TensorPart::client) {
    s.client += bytes;
    if (place.in_layer) s.layer_rest[place.layer] += bytes;
    return Ok{};
  }
  (place.part == TensorPart::experts ? s.expert_ffn : s.dense_ffn)[place.layer] += bytes;
  return Ok{};
}

void size_from(ModelSizes& s, const ModelConfig& c) {
  s.layers = c.layers;
  s.experts = c.moe.expert_ids();
  s.dense_ffn.assign(c.layers, 0);
  s.expert_ffn.assign(c.layers, 0);
  s.layer_rest.assign(c.layers, 0);
  s.kv_per_position = c.kv_bytes_per_position();
  const std::vector<size_t> windows = kv_windows(c);
  for (size_t l = 0; l < c.layers; ++l) {
    const std::pair<size_t, uint64_t> kv{windows[l], c.owns_kv(l) ? 2 * c.kv_dim(l) * sizeof(float) : 0};
    if (c.owns_kv(l)) s.kv_layers.push_back(kv);
    s.kv_of_layer.push_back(kv);
    s.kv_source.push_back(c.kv_layer(l));
  }
  s.context = c.context;
}

}  // namespace

Result<ModelSizes> read_model_sizes(const std::string& path) {
  namespace fs = std::filesystem;
  ModelSizes s;
  if (is_gguf_file(path)) {
    auto file = read_gguf(path);
    if (!file) return file.error();
    auto config = gguf_model_config(*file, path);
    if (!config) return config.error();
    size_from(s, *config);
    for (const auto& [name, t] : file->tensors)
      if (auto added = add_tensor(s, name, t.bytes, path); !added) return added.error();
    return s;
  }
  if (!fs::is_directory(path))
    return make_error(ErrorCode::invalid_argument, path + " is neither a GGUF file nor a Hugging Face directory");
  auto config = read_hf_config(path);
  if (!config) return config.error();
  size_from(s, *config);
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(path))
    if (e.path().extension() == ".safetensors") files.push_back(e.path());
  if (files.empty()) return make_error(ErrorCode::invalid_argument, path + " holds no .safetensors file");
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    auto st = read_safetensors(f.string());
    if (!st) return st.error();
    for (const auto& [name, t] : st->tensors)
      if (auto added = add_tensor(s, name, t.bytes, f.string()); !added) return added.error();
  }
  return s;
}

}  // namespace larql
