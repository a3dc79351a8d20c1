#include "model/hf_loader.h"

#include "kernels/portable_math.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <span>

#include "model/families.h"
#include "model/kv_sharing.h"
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

// What transformers' configuration classes assume for keys a config.json leaves out
// (Gemma 3's multimodal checkpoints list only what differs from these).
const json& config_defaults(std::string_view family) {
  static const json none = json::object();
  static const json gemma2 = {{"vocab_size", 256000}, {"hidden_size", 2304}, {"intermediate_size", 9216},
                              {"num_hidden_layers", 26}, {"num_attention_heads", 8}, {"num_key_value_heads", 4},
                              {"head_dim", 256}, {"hidden_activation", "gelu_pytorch_tanh"},
                              {"max_position_embeddings", 8192}, {"rms_norm_eps", 1e-6}, {"rope_theta", 10000.0},
                              {"query_pre_attn_scalar", 256}, {"sliding_window", 4096},
                              {"final_logit_softcapping", 30.0}, {"attn_logit_softcapping", 50.0},
                              {"bos_token_id", 2}, {"eos_token_id", 1}};
  static const json gemma3 = {{"vocab_size", 262208}, {"hidden_size", 2304}, {"intermediate_size", 9216},
                              {"num_hidden_layers", 26}, {"num_attention_heads", 8}, {"num_key_value_heads", 4},
                              {"head_dim", 256}, {"hidden_activation", "gelu_pytorch_tanh"},
                              {"max_position_embeddings", 131072}, {"rms_norm_eps", 1e-6}, {"rope_theta", 1000000.0},
                              {"query_pre_attn_scalar", 256}, {"sliding_window", 4096}, {"rope_local_base_freq", 10000.0},
                              {"sliding_window_pattern", 6}, {"bos_token_id", 2}, {"eos_token_id", 1}};
  static const json gemma4 = {{"hidden_activation", "gelu_pytorch_tanh"}, {"rms_norm_eps", 1e-6}, {"bos_token_id", 2},
                              {"eos_token_id", 1}, {"attention_k_eq_v", false}};
  if (family == "gemma2") return gemma2;
  if (family == "gemma3_text") return gemma3;
  if (family == "gemma4_text") return gemma4;
  return none;
}

// A multimodal checkpoint's text model: Gemma3ForConditionalGeneration keeps it in text_config.
json text_config_of(const json& j) {
  if (!j.contains("text_config") || !j["text_config"].is_object()) return j;
  json text = j["text_config"];
  const std::string outer = j.value("model_type", std::string());
  if (!text.contains("model_type") && (outer == "gemma3" || outer == "gemma4")) text["model_type"] = outer + "_text";
  for (const char* key : {"bos_token_id", "eos_token_id"})
    if (!text.contains(key) && j.contains(key)) text[key] = j[key];
  return text;
}

// v as the element format t stores it (f32, f16 or bf16: safetensors' formats).
float round_to(DType t, float v) {
  if (t == DType::f16) return f16_to_f32(f32_to_f16(v));
  if (t == DType::bf16) return bf16_to_f32(f32_to_bf16(v));
  return v;
}

// The JSON type each optional field must have when it is given: nlohmann's value() throws
// on another type (that aborted larql), and a "rope_theta": "1e6" read as absent would run
// the model with the wrong numbers. Null counts as not given.
enum class JsonKind { string, number, boolean, object, array };
struct TypedField {
  const char* key;
  JsonKind kind;
};
constexpr TypedField kConfigFields[] = {
    {"model_type", JsonKind::string},          {"text_config", JsonKind::object},
    {"rms_norm_eps", JsonKind::number},        {"rope_theta", JsonKind::number},
    {"rope_local_base_freq", JsonKind::number}, {"rope_parameters", JsonKind::object},
    {"rope_scaling", JsonKind::object},        {"layer_types", JsonKind::array},
    {"sliding_window_pattern", JsonKind::number}, {"attention_k_eq_v", JsonKind::boolean},
    {"hidden_size_per_layer_input", JsonKind::number}, {"num_kv_shared_layers", JsonKind::number},
    {"vocab_size_per_layer_input", JsonKind::number}, {"use_double_wide_mlp", JsonKind::boolean},
    {"enable_moe_block", JsonKind::boolean},   {"hidden_activation", JsonKind::string},
    {"hidden_act", JsonKind::string},          {"attention_bias", JsonKind::boolean},
    {"query_pre_attn_scalar", JsonKind::number}, {"attn_logit_softcapping", JsonKind::number},
    {"final_logit_softcapping", JsonKind::number},
    {"num_local_experts", JsonKind::number},   {"num_experts", JsonKind::number},
    {"num_experts_per_tok", JsonKind::number}, {"moe_intermediate_size", JsonKind::number},
    {"norm_topk_prob", JsonKind::boolean},     {"decoder_sparse_step", JsonKind::number},
    {"mlp_only_layers", JsonKind::array},     {"top_k_experts", JsonKind::number},
    {"swiglu_limit", JsonKind::number},
};
constexpr TypedField kRopeFields[] = {
    {"rope_type", JsonKind::string}, {"type", JsonKind::string}, {"rope_theta", JsonKind::number},
    {"factor", JsonKind::number}, {"low_freq_factor", JsonKind::number}, {"high_freq_factor", JsonKind::number},
    {"original_max_position_embeddings", JsonKind::number}, {"partial_rotary_factor", JsonKind::number},
    {"full_attention", JsonKind::object}, {"sliding_attention", JsonKind::object},
    {"beta_fast", JsonKind::number}, {"beta_slow", JsonKind::number}, {"truncate", JsonKind::boolean},
    {"attention_factor", JsonKind::number},
};

// Refuses a field of `j` of the wrong type, naming it; drops the null ones.
Status check_field_types(json& j, std::span<const TypedField> fields, const std::string& where) {
  static constexpr const char* kNames[] = {"a string", "a number", "true or false", "an object", "an array"};
  if (!j.is_object()) return Ok{};
  for (const auto& f : fields) {
    if (!j.contains(f.key)) continue;
    const json& v = j[f.key];
    if (v.is_null()) {
      j.erase(f.key);
      continue;
    }
    const bool ok = f.kind == JsonKind::string ? v.is_string() : f.kind == JsonKind::number ? v.is_number()
                    : f.kind == JsonKind::boolean ? v.is_boolean() : f.kind == JsonKind::object ? v.is_object() : v.is_array();
    if (!ok)
      return make_error(ErrorCode::invalid_argument, where + "field '" + f.key + "' must be " + kNames[int(f.kind)] +
                                                         ", not " + v.dump());
  }
  return Ok{};
}

float optional_float(const json& j, const char* key, float fallback) {
  return j.contains(key) && j[key].is_number() ? j[key].get<float>() : fallback;
}

// A mixture-of-experts family's experts (the family's keys: Mixtral's num_local_experts of
// intermediate_size; Qwen3-MoE's num_experts of moe_intermediate_size, norm_topk_prob, and
// dense layers by mlp_only_layers and decoder_sparse_step (Qwen2-MoE's too, with its shared
// expert of shared_expert_intermediate_size); Gemma 4's num_experts,
// top_k_experts and moe_intermediate_size when enable_moe_block) into c.moe and each
// layer's `sparse`.
Status read_moe_config(const json& j, const Family& family, ModelConfig& c, const std::string& where) {
  auto fail = [&](const std::string& what) { return make_error(ErrorCode::invalid_argument, where + what); };
  auto count = [&](std::string_view key, size_t& out) -> Status {
    const std::string k(key);
    if (!j.contains(k) || !j[k].is_number_unsigned() || j[k].get<size_t>() == 0)
      return fail("field '" + k + "' must be a positive integer");
    out = j[k].get<size_t>();
    return Ok{};
  };
  const MoeNames& names = *family.moe;
  if (names.beside_dense && !j.value("enable_moe_block", false)) return Ok{};  // a dense model of the family
  MoeSpec& moe = c.moe;
  if (auto s = count(names.experts_key, moe.experts); !s) return s;
  if (auto s = count(names.top_k_key, moe.experts_used); !s) return s;
  if (moe.experts_used > moe.experts)
    return fail(std::string(names.top_k_key) + " is " + std::to_string(moe.experts_used) + "; expected at most the " +
                std::to_string(moe.experts) + " experts");
  moe.expert_ffn = c.ffn;
  if (!names.width_key.empty())
    if (auto s = count(names.width_key, moe.expert_ffn); !s) return s;
  if (!names.shared_width_key.empty()) {
    moe.shared_experts = 1;
    if (auto s = count(names.shared_width_key, moe.shared_expert_ffn); !s) return s;
  }
  moe.weights = names.weights;
  moe.beside_dense = names.beside_dense;
  if (j.value("norm_topk_prob", false)) moe.weights = RouterWeights::softmax_top_k_renormalised;
  size_t step = 1;
  if (j.contains("decoder_sparse_step"))
    if (auto s = count("decoder_sparse_step", step); !s) return s;
  std::vector<bool> dense(c.layers, false);
  for (const json& l : j.value("mlp_only_layers", json::array())) {
    if (!l.is_number_unsigned() || l.get<size_t>() >= c.layers)
      return fail("mlp_only_layers has " + l.dump() + "; expected layer numbers below " + std::to_string(c.layers));
    dense[l.get<size_t>()] = true;
  }
  for (size_t l = 0; l < c.layers; ++l) c.layer_configs[l].sparse = !dense[l] && (l + 1) % step == 0;
  return Ok{};
}

// Gemma 4's E models: per-layer embeddings (hidden_size_per_layer_input, over
// vocab_size_per_layer_input tokens), the last num_kv_shared_layers reading earlier layers'
// KV caches, and with use_double_wide_mlp (E2B) those layers' FFN twice as wide. 0 or absent:
// none of these. Needs c's layer configs.
Status read_e_model_config(const json& j, ModelConfig& c, const std::string& where) {
  auto count = [&](const char* key, size_t& out) -> Status {
    if (!j.contains(key) || (j[key].is_number_integer() && j[key].get<int64_t>() == 0)) return Ok{};
    if (!j[key].is_number_unsigned()) return make_error(ErrorCode::invalid_argument, where + "field '" + key + "' must be a whole number");
    out = j[key].get<size_t>();
    return Ok{};
  };
  size_t shared = 0;
  if (auto s = count("hidden_size_per_layer_input", c.ple_dim); !s) return s;
  if (auto s = count("num_kv_shared_layers", shared); !s) return s;
  if (c.ple_dim) {
    c.ple_vocab = c.vocab;
    if (auto s = count("vocab_size_per_layer_input", c.ple_vocab); !s) return s;
    c.ple_scale = std::sqrt(float(c.ple_dim));  // rounded to the table's dtype once it is known
  }
  if (auto s = share_kv_of_last_layers(c, shared); !s) return make_error(ErrorCode::invalid_argument, where + s.error().message);
  if (j.value("use_double_wide_mlp", false)) widen_kv_shared_ffn(c);
  return Ok{};
}

}  // namespace

Result<ModelConfig> read_hf_config(const std::string& dir) {
  const fs::path path = fs::path(dir) / "config.json";
  auto doc = read_json(path);
  if (!doc) return doc.error();
  if (auto s = check_field_types(*doc, kConfigFields, path.string() + ": "); !s) return s.error();
  if (doc->contains("text_config"))  // an object by now
    if (auto s = check_field_types((*doc)["text_config"], kConfigFields, path.string() + ": text_config: "); !s) return s.error();
  json j = text_config_of(*doc);
  for (const char* key : {"rope_parameters", "rope_scaling"})
    if (j.contains(key)) {
      if (auto s = check_field_types(j[key], kRopeFields, path.string() + ": " + key + ": "); !s) return s.error();
      for (const char* kind : {"full_attention", "sliding_attention"})
        if (j[key].contains(kind))
          if (auto s = check_field_types(j[key][kind], kRopeFields, path.string() + ": " + key + "." + kind + ": "); !s)
            return s.error();
    }
  auto fail = [&](const std::string& what) { return make_error(ErrorCode::invalid_argument, path.string() + ": " + what); };

  ModelConfig c;
  c.name = fs::path(dir).filename().string();
  if (c.name.empty()) c.name = fs::path(dir).parent_path().filename().string();
  c.family = j.value("model_type", std::string());
  const Family* family = find_family(c.family);
  if (!family) return fail("model_type '" + c.family + "' is not supported; expected " + family_names(false) + " (or gemma3)");
  for (const auto& [key, value] : config_defaults(c.family).items())
    if (!j.contains(key) || j[key].is_null()) j[key] = value;

  auto need = [&](const char* key, size_t& out) -> Status {
    if (!j.contains(key) || !j[key].is_number_unsigned() || j[key].get<size_t>() == 0)
      return fail(std::string("field '") + key + "' must be a positive integer");
    out = j[key].get<size_t>();
    return Ok{};
  };
  for (auto [key, out] : {std::pair{"hidden_size", &c.hidden}, {"intermediate_size", &c.ffn},
                          {"num_hidden_layers", &c.layers}, {"num_attention_heads", &c.heads}, {"vocab_size", &c.vocab},
                          {"max_position_embeddings", &c.context}})
    if (auto s = need(key, *out); !s) return s.error();
  // Per-layer tables are sized from num_hidden_layers before any tensor is read (a
  // config's 10^8 layers made larql abort allocating them): bounded here, at twice
  // llama.cpp's LLAMA_MAX_LAYERS, several times any released model's.
  constexpr size_t kMaxLayers = 1024;
  if (c.layers > kMaxLayers)
    return fail("num_hidden_layers is " + std::to_string(c.layers) + "; expected at most " + std::to_string(kMaxLayers));
  c.kv_heads = c.heads;
  if (j.contains("num_key_value_heads") && !j["num_key_value_heads"].is_null())
    if (auto s = need("num_key_value_heads", c.kv_heads); !s) return s.error();
  c.head_dim = c.hidden / c.heads;
  if (j.contains("head_dim") && !j["head_dim"].is_null())
    if (auto s = need("head_dim", c.head_dim); !s) return s.error();
  if (c.heads % c.kv_heads != 0 || c.head_dim % 2 != 0)
    return fail("num_attention_heads must be a multiple of num_key_value_heads, and head_dim even");
  c.norm_eps = j.value("rms_norm_eps", 1e-6f);
  c.norm_placement = family->norms;
  c.norm_weight_offset = family->hf_norm_weight_offset;
  c.rope_layout = RopeLayout::half_split;

  // Which layers slide: layer_types (newer files) or a period (older ones, or the family's).
  std::vector<AttentionKind> kinds(c.layers, AttentionKind::full);
  if (j.contains("layer_types") && j["layer_types"].is_array()) {
    const json& types = j["layer_types"];
    if (types.size() != c.layers) return fail("layer_types has " + std::to_string(types.size()) + " entries for " + std::to_string(c.layers) + " layers");
    for (size_t l = 0; l < c.layers; ++l) {
      const std::string type = types[l].is_string() ? types[l].get<std::string>() : "";
      if (type == "sliding_attention") kinds[l] = AttentionKind::sliding;
      else if (type != "full_attention") return fail("layer_types[" + std::to_string(l) + "] is '" + type + "'; expected sliding_attention or full_attention");
    }
  } else {
    const size_t period = j.contains("sliding_window_pattern") && j["sliding_window_pattern"].is_number_unsigned()
                              ? j["sliding_window_pattern"].get<size_t>()
                              : family->sliding_period;
    for (size_t l = 0; l < c.layers; ++l) kinds[l] = periodic_attention_kind(l, period);
  }
  size_t window = 0;
  if (std::count(kinds.begin(), kinds.end(), AttentionKind::sliding) > 0)
    if (auto s = need("sliding_window", window); !s) return s.error();

  // RoPE per layer kind: rope_parameters per kind (transformers v5), or rope_theta and
  // rope_scaling (for sliding layers too, unless rope_local_base_freq gives theirs).
  // Gemma 4's "proportional" RoPE turns partial_rotary_factor of each head's pairs; which
  // pairs is known once the layer's head size is (proportional_fraction, resolved below).
  float full_fraction = 0, sliding_fraction = 0;
  auto parse_rope = [&](const json& params, float theta, float& proportional_fraction) -> Result<RopeSpec> {
    RopeSpec rope;
    rope.theta = optional_float(params, "rope_theta", theta);
    const std::string type = params.is_object() ? params.value("rope_type", params.value("type", std::string("default"))) : "default";
    if (type == "linear") rope.linear_factor = optional_float(params, "factor", 1.0f);
    else if (type == "proportional") {
      proportional_fraction = optional_float(params, "partial_rotary_factor", 1.0f);
      rope.linear_factor = optional_float(params, "factor", 1.0f);
    }
    else if (type == "llama3")
      rope.llama3 = Llama3RopeScaling{optional_float(params, "factor", 8.0f), optional_float(params, "low_freq_factor", 1.0f),
                                      optional_float(params, "high_freq_factor", 4.0f),
                                      optional_float(params, "original_max_position_embeddings", 8192.0f)};
    else if (type == "yarn") {
      for (const char* key : {"mscale", "mscale_all_dim"})
        if (params.contains(key) && !params[key].is_null())
          return fail(std::string("yarn rope with '") + key + "' (DeepSeek's attention factor) is not supported");
      YarnRopeScaling yarn;
      yarn.factor = optional_float(params, "factor", 1.0f);
      yarn.original_max_position = optional_float(params, "original_max_position_embeddings", float(c.context));
      yarn.beta_fast = optional_float(params, "beta_fast", 32.0f);
      yarn.beta_slow = optional_float(params, "beta_slow", 1.0f);
      yarn.truncate = params.value("truncate", true);
      yarn.attention_factor = optional_float(params, "attention_factor", 0.0f);
      if (!(yarn.factor >= 1) || !(yarn.original_max_position > 0) || !(yarn.beta_fast > 0) || !(yarn.beta_slow > 0))
        return fail("yarn rope needs factor ≥ 1 and positive original_max_position_embeddings, beta_fast and beta_slow");
      rope.yarn = yarn;
    }
    else if (type != "default") return fail("rope type '" + type + "' is not supported; expected default, linear, proportional, llama3 or yarn");
    return rope;
  };
  const float theta = optional_float(j, "rope_theta", 10000.0f);
  const json no_scaling = json::object();
  const json& params = j.contains("rope_parameters") && j["rope_parameters"].is_object() ? j["rope_parameters"] : no_scaling;
  const bool per_kind = params.contains("full_attention") || params.contains("sliding_attention");
  const json& scaling = j.contains("rope_scaling") && j["rope_scaling"].is_object() ? j["rope_scaling"] : params;
  auto full_rope = parse_rope(per_kind ? params.value("full_attention", no_scaling) : scaling, theta, full_fraction);
  if (!full_rope) return full_rope.error();
  // Gemma 3's sliding layers have their own base (rope_local_base_freq) and no scaling;
  // other families' sliding layers (GPT-OSS) turn as the full ones do.
  const bool local_base = j.contains("rope_local_base_freq");
  auto sliding_rope = parse_rope(per_kind ? params.value("sliding_attention", no_scaling) : local_base ? no_scaling : scaling,
                                 optional_float(j, "rope_local_base_freq", theta), sliding_fraction);
  if (!sliding_rope) return sliding_rope.error();

  // Gemma 4's full layers: their own head size, and with attention_k_eq_v their own KV
  // heads and values that are their keys.
  size_t full_head_dim = c.head_dim, full_kv_heads = c.kv_heads;
  const bool values_are_keys = j.value("attention_k_eq_v", false);
  if (j.contains("global_head_dim") && !j["global_head_dim"].is_null())
    if (auto s = need("global_head_dim", full_head_dim); !s) return s.error();
  if (values_are_keys)
    if (auto s = need("num_global_key_value_heads", full_kv_heads); !s) return s.error();
  if (c.heads % full_kv_heads != 0 || full_head_dim % 2 != 0)
    return fail("num_attention_heads must be a multiple of num_global_key_value_heads, and global_head_dim even");
  for (size_t l = 0; l < c.layers; ++l) {
    const bool sliding = kinds[l] == AttentionKind::sliding;
    LayerConfig lc{.attention = kinds[l], .window = sliding ? window : 0, .rope = sliding ? *sliding_rope : *full_rope,
                   .head_dim = sliding ? c.head_dim : full_head_dim, .kv_heads = sliding ? c.kv_heads : full_kv_heads,
                   .values_are_keys = !sliding && values_are_keys};
    if (const float fraction = sliding ? sliding_fraction : full_fraction; fraction > 0)
      lc.rope.rotated_pairs = size_t(fraction * float(lc.head_dim) / 2);
    c.layer_configs.push_back(lc);
  }

  if (family->gemma4_attention)
    if (auto s = read_e_model_config(j, c, path.string() + ": "); !s) return s.error();
  if (family->moe)
    if (auto s = read_moe_config(j, *family, c, path.string() + ": "); !s) return s.error();

  const std::string act = j.value("hidden_activation", j.value("hidden_act", std::string(family->activation == Activation::silu ? "silu" : "gelu_pytorch_tanh")));
  if (family->activation == Activation::swiglu_clamped) {  // GPT-OSS's config says "silu"; its experts clamp
    c.activation = Activation::swiglu_clamped;
    c.swiglu_limit = optional_float(j, "swiglu_limit", 7.0f);
    if (!(c.swiglu_limit > 0)) return fail("swiglu_limit must be positive");
  } else if (act == "silu") c.activation = Activation::silu;
  else if (act == "gelu_pytorch_tanh" || act == "gelu_tanh") c.activation = Activation::gelu_tanh;
  else return fail("hidden_act '" + act + "' is not supported; expected silu or gelu_pytorch_tanh");
  c.attention_bias = j.value("attention_bias", family->attention_bias);
  c.qk_norm = family->qk_norm;
  c.attention_sinks = family->attention_sinks;
  if (j.contains("query_pre_attn_scalar") && j["query_pre_attn_scalar"].is_number()) {
    const double scalar = j["query_pre_attn_scalar"].get<double>();
    if (!(scalar > 0)) return fail("query_pre_attn_scalar must be positive");
    c.attention_scale = float(portable_pow(scalar, -0.5));
  }
  if (family->gemma4_attention) {
    c.attention_scale = 1.0f;
    c.value_norm = true;
    c.layer_scalar = true;
  }
  c.attention_softcap = optional_float(j, "attn_logit_softcapping", 0.0f);
  c.final_softcap = optional_float(j, "final_logit_softcapping", 0.0f);
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

  // The text model's prefix: "model." in causal-LM files; multimodal ones nest it as
  // "language_model.model." (original Gemma 3 files) or "model.language_model." (re-saved).
  std::string prefix = "model.";
  for (const char* candidate : {"model.", "language_model.model.", "model.language_model."})
    if (tensors.count(std::string(candidate) + "embed_tokens.weight")) prefix = candidate;
  const std::string head_prefix = prefix == "language_model.model." ? "language_model." : "";
  auto stored_name = [&](const std::string& name) {
    if (name.starts_with("model.")) return prefix + name.substr(6);
    return head_prefix + name;  // lm_head.weight
  };
  // The vocabulary is the embedding's row count (Gemma 3's config counts padding rows).
  if (auto e = tensors.find(stored_name("model.embed_tokens.weight")); e != tensors.end() && e->second.first.shape.size() == 2) {
    m.config.vocab = e->second.first.shape[0];
    // HF Gemma rounds √hidden to the embedding's dtype before multiplying.
    if (find_family(m.config.family)->scaled_embedding) {
      const float scale = float(std::sqrt(double(m.config.hidden)));
      m.config.embedding_scale = round_to(e->second.first.dtype, scale);
    }
  }
  // The per-layer embeddings' vocabulary is their table's row count, as the main one is; HF
  // rounds √ple_dim to the table's dtype, as √hidden.
  if (auto e = tensors.find(stored_name("model.embed_tokens_per_layer.weight"));
      m.config.ple_dim && e != tensors.end() && e->second.first.shape.size() == 2) {
    m.config.ple_vocab = e->second.first.shape[0];
    m.config.ple_scale = round_to(e->second.first.dtype, m.config.ple_scale);
  }
  size_t unused = 0;
  for (const auto& [name, info] : tensors)
    if (!name.starts_with(prefix) && !name.starts_with(head_prefix + "lm_head.")) ++unused;
  if (unused > 0)
    m.notes.push_back("skipped " + std::to_string(unused) + " tensors outside the text model (" + prefix +
                      "*), e.g. a vision tower: larql runs the text decoder only");

  auto status = assemble_model(m, CheckpointFormat::hf, dir, [&](const std::string& name) -> std::optional<FoundTensor> {
    auto it = tensors.find(stored_name(name));
    if (it == tensors.end()) return std::nullopt;
    const TensorInfo& t = it->second.first;
    if (t.raw_bytes) return FoundTensor{std::nullopt, "U8", t.shape, t.data, it->second.second};
    return FoundTensor{t.dtype, {}, t.shape, t.data, it->second.second};
  });
  if (!status) return status.error();
  return m;
}

}  // namespace larql
