#include "model/hf_loader.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "model/families.h"
#include "model/safetensors.h"
#include "model/tensor_names.h"

namespace larql {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

Result<json> read_json(const fs::path& path) {
  std::ifstream in(path);
  if (!in) return make_error(ErrorCode::invalid_argument, "cannot read " + path.string());
  json doc = json::parse(in, nullptr, false);
  if (doc.is_discarded() || !doc.is_object())
    return make_error(ErrorCode::invalid_argument, path.string() + " is not a JSON object");
  return doc;
}

std::vector<int> ids_of(const json& v) {
  std::vector<int> out;
  if (v.is_number_integer()) out.push_back(v.get<int>());
  if (v.is_array())
    for (const auto& x : v)
      if (x.is_number_integer()) out.push_back(x.get<int>());
  return out;
}

}  // namespace

Result<ModelConfig> read_hf_config(const std::string& dir) {
  const fs::path path = fs::path(dir) / "config.json";
  auto doc = read_json(path);
  if (!doc) return doc.error();
  const json& j = *doc;
  auto fail = [&](const std::string& what) { return make_error(ErrorCode::invalid_argument, path.string() + ": " + what); };
  auto need = [&](const char* key, size_t& out) -> Status {
    if (!j.contains(key) || !j[key].is_number_unsigned() || j[key].get<size_t>() == 0)
      return fail(std::string("field '") + key + "' must be a positive integer");
    out = j[key].get<size_t>();
    return Ok{};
  };

  ModelConfig c;
  c.name = fs::path(dir).filename().string();
  if (c.name.empty()) c.name = fs::path(dir).parent_path().filename().string();
  c.family = j.value("model_type", std::string());
  const Family* family = find_family(c.family);
  if (!family)
    return fail("model_type '" + c.family + "' is not supported; expected llama, mistral, qwen2 or qwen3");
  for (auto [key, out] : {std::pair{"hidden_size", &c.hidden}, {"intermediate_size", &c.ffn},
                          {"num_hidden_layers", &c.layers}, {"num_attention_heads", &c.heads}, {"vocab_size", &c.vocab},
                          {"max_position_embeddings", &c.context}})
    if (auto s = need(key, *out); !s) return s.error();
  c.kv_heads = c.heads;
  if (j.contains("num_key_value_heads") && !j["num_key_value_heads"].is_null())
    if (auto s = need("num_key_value_heads", c.kv_heads); !s) return s.error();
  c.head_dim = c.hidden / c.heads;
  if (j.contains("head_dim") && !j["head_dim"].is_null())
    if (auto s = need("head_dim", c.head_dim); !s) return s.error();
  if (c.heads % c.kv_heads != 0 || c.head_dim % 2 != 0)
    return fail("num_attention_heads must be a multiple of num_key_value_heads, and head_dim even");
  c.norm_eps = j.value("rms_norm_eps", 1e-6f);
  c.rope_theta = j.value("rope_theta", 10000.0f);
  c.rope_layout = RopeLayout::half_split;
  if (j.contains("rope_scaling") && j["rope_scaling"].is_object()) {
    const json& rs = j["rope_scaling"];
    const std::string type = rs.value("rope_type", rs.value("type", std::string()));
    if (type != "llama3") return fail("rope_scaling type '" + type + "' is not supported; expected llama3 (or none)");
    c.rope_scaling = Llama3RopeScaling{rs.value("factor", 8.0f), rs.value("low_freq_factor", 1.0f),
                                       rs.value("high_freq_factor", 4.0f),
                                       rs.value("original_max_position_embeddings", 8192.0f)};
  }
  const std::string act = j.value("hidden_act", std::string("silu"));
  if (act == "silu") c.activation = Activation::silu;
  else if (act == "gelu_pytorch_tanh" || act == "gelu_tanh") c.activation = Activation::gelu_tanh;
  else return fail("hidden_act '" + act + "' is not supported; expected silu or gelu_pytorch_tanh");
  c.attention_bias = j.value("attention_bias", family->attention_bias);
  c.qk_norm = family->qk_norm;
  if (j.contains("bos_token_id") && j["bos_token_id"].is_number_integer()) c.bos_id = j["bos_token_id"].get<int>();
  if (j.contains("eos_token_id")) c.eos_ids = ids_of(j["eos_token_id"]);
  // generation_config.json, where present, is what generation should use.
  if (fs::exists(fs::path(dir) / "generation_config.json")) {
    auto gen = read_json(fs::path(dir) / "generation_config.json");
    if (!gen) return gen.error();
    if (gen->contains("eos_token_id")) c.eos_ids = ids_of((*gen)["eos_token_id"]);
    if (gen->contains("bos_token_id") && (*gen)["bos_token_id"].is_number_integer()) c.bos_id = (*gen)["bos_token_id"].get<int>();
  }
  return c;
}

Result<Model> load_hf_directory(const std::string& dir) {
  auto config = read_hf_config(dir);
  if (!config) return config.error();
  Model m;
  m.config = *config;

  // Which files hold the weights.
  std::vector<std::string> shard_files;
  const fs::path single = fs::path(dir) / "model.safetensors", index = fs::path(dir) / "model.safetensors.index.json";
  if (fs::exists(single)) {
    shard_files.push_back(single.string());
  } else if (fs::exists(index)) {
    auto idx = read_json(index);
    if (!idx) return idx.error();
    if (!idx->contains("weight_map") || !(*idx)["weight_map"].is_object())
      return make_error(ErrorCode::invalid_argument, index.string() + ": no weight_map object");
    std::set<std::string> names;
    for (const auto& [tensor, file] : (*idx)["weight_map"].items())
      if (file.is_string()) names.insert(file.get<std::string>());
    for (const auto& name : names) shard_files.push_back((fs::path(dir) / name).string());
  } else {
    return make_error(ErrorCode::invalid_argument, dir + ": neither model.safetensors nor model.safetensors.index.json");
  }
  std::map<std::string, std::pair<TensorInfo, std::string>> tensors;
  for (const auto& file : shard_files) {
    auto st = read_safetensors(file);
    if (!st) return st.error();
    for (auto& [name, info] : st->tensors) tensors.emplace(name, std::pair{info, file});
    m.files.push_back(st->file);
  }

  auto status = assemble_model(m, CheckpointFormat::hf, dir, [&](const std::string& name) -> std::optional<FoundTensor> {
    auto it = tensors.find(name);
    if (it == tensors.end()) return std::nullopt;
    return FoundTensor{it->second.first.dtype, {}, it->second.first.shape, it->second.first.data, it->second.second};
  });
  if (!status) return status.error();
  return m;
}

}  // namespace larql
