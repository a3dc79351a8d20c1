#include "model/gguf_loader.h"

#include "kernels/portable_math.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "kernels/block_formats.h"
#include "model/expert_tensors.h"
#include "model/families.h"
#include "model/gguf_tokenizer.h"
#include "model/kv_sharing.h"
#include "model/rope_rows.h"
#include "model/tensor_names.h"

namespace larql {
namespace {

// Llama 3's frequency scaling as llama.cpp's converter writes it: one divisor per rotated
// pair (the rope_freqs tensor), instead of rope_scaling in the config.
std::vector<float> llama3_rope_divisors(const ModelConfig& c) {
  const Llama3RopeScaling& s = *c.layer_configs.at(0).rope.llama3;
  const float theta = c.layer_configs.at(0).rope.theta;
  const double low_freq_wavelen = s.original_max_position / s.low_freq_factor;
  const double high_freq_wavelen = s.original_max_position / s.high_freq_factor;
  std::vector<float> out;
  for (size_t i = 0; i < c.head_dim / 2; ++i) {
    const double freq = 1.0 / portable_pow(double(theta), double(2 * i) / double(c.head_dim));
    const double wavelen = 2 * M_PI / freq;
    if (wavelen < high_freq_wavelen) out.push_back(1.0f);
    else if (wavelen > low_freq_wavelen) out.push_back(s.factor);
    else {
      const double smooth = (s.original_max_position / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
      out.push_back(float(1 / ((1 - smooth) / s.factor + smooth)));
    }
  }
  return out;
}

// Which layers slide: `<arch>.attention.sliding_window_pattern` as a per-layer bool array
// (true: sliding) or a period, else the family's period (llama.cpp's defaults).
Status layer_kinds(const GgufFile& f, const std::string& arch, const Family& family, ModelConfig& c, const RopeSpec& full,
                   const RopeSpec& sliding, const std::vector<size_t>& kv_heads, size_t full_head_dim) {
  std::vector<AttentionKind> kinds(c.layers);
  const GgufValue* pattern = f.find(arch + ".attention.sliding_window_pattern");
  if (pattern && pattern->type == GgufValueType::array) {
    if (pattern->count() != c.layers || pattern->element == GgufValueType::string)
      return make_error(ErrorCode::invalid_argument, arch + ".attention.sliding_window_pattern has " +
                                                         std::to_string(pattern->count()) + " entries for " +
                                                         std::to_string(c.layers) + " layers");
    for (size_t l = 0; l < c.layers; ++l) kinds[l] = pattern->integer_at(l) ? AttentionKind::sliding : AttentionKind::full;
  } else {
    const size_t period = pattern && pattern->integer > 0 ? size_t(pattern->integer) : family.sliding_period;
    for (size_t l = 0; l < c.layers; ++l) kinds[l] = periodic_attention_kind(l, period);
  }
  size_t window = 0;
  if (std::count(kinds.begin(), kinds.end(), AttentionKind::sliding) > 0) {
    const GgufValue* v = f.number(arch + ".attention.sliding_window");
    if (!v || v->integer <= 0)
      return make_error(ErrorCode::invalid_argument, arch + ".attention.sliding_window must be a positive integer");
    window = size_t(v->integer);
  }
  for (size_t l = 0; l < c.layers; ++l) {
    const bool slides = kinds[l] == AttentionKind::sliding;
    // Gemma 4's K=V layers have no attn_v tensor (llama.cpp then uses K).
    const bool values_are_keys = family.gemma4_attention && !slides && !f.tensors.count("blk." + std::to_string(l) + ".attn_v.weight");
    c.layer_configs.push_back(LayerConfig{.attention = kinds[l], .window = slides ? window : 0, .rope = slides ? sliding : full,
                                          .head_dim = slides ? c.head_dim : full_head_dim, .kv_heads = kv_heads[l],
                                          .values_are_keys = values_are_keys});
  }
  return Ok{};
}

// Gemma 4's E models: per-layer embeddings (their width; their vocabulary is their table's)
// and the last layers sharing earlier layers' KV caches. Needs c's layer configs.
Status e_model_config(const GgufFile& f, const std::string& arch, ModelConfig& c) {
  for (auto [key, out] : {std::pair{".embedding_length_per_layer_input", &c.ple_dim}, {".attention.shared_kv_layers", nullptr}}) {
    const GgufValue* v = f.find(arch + key);
    if (!v) continue;
    if (v->type == GgufValueType::array || v->type == GgufValueType::string || v->integer < 0 || v->integer > (int64_t(1) << 32))
      return make_error(ErrorCode::invalid_argument, arch + key + " must be a whole number");
    if (out) *out = size_t(v->integer);
    else if (auto s = share_kv_of_last_layers(c, size_t(v->integer)); !s) return s;
  }
  if (c.ple_dim) {
    auto table = f.tensors.find("per_layer_token_embd.weight");
    if (table == f.tensors.end() || table->second.shape.size() != 2)
      return make_error(ErrorCode::invalid_argument, "tensor 'per_layer_token_embd.weight' is missing or not 2-D");
    c.ple_vocab = table->second.shape[0];
    c.ple_scale = std::sqrt(float(c.ple_dim));  // llama.cpp: exact, unrounded
  }
  return Ok{};
}

// llama.cpp's scale for Gemma's attention scores, which GGUF files do not store (HF's
// query_pre_attn_scalar): (hidden / heads)^-0.5 for the 27B models (46 or 62 layers),
// head_dim^-0.5 otherwise. `<arch>.attention.scale`, which larql writes when a checkpoint
// breaks that rule, wins.
size_t llama_cpp_gemma_scalar(const Family& family, const ModelConfig& c) {
  const bool is_27b = (family.name == "gemma2" && c.layers == 46) || (family.name == "gemma3_text" && c.layers == 62);
  return is_27b ? c.hidden / c.heads : c.head_dim;
}

Status gemma_attention(const GgufFile& f, const std::string& arch, const Family& family, ModelConfig& c) {
  if (family.gemma4_attention) {
    c.attention_scale = 1.0f;
    c.value_norm = true;
    c.layer_scalar = true;
    return Ok{};
  }
  if (family.norms != NormPlacement::sandwich) return Ok{};
  c.attention_scale = 1.0f / std::sqrt(float(llama_cpp_gemma_scalar(family, c)));
  if (const GgufValue* v = f.number(arch + ".attention.scale")) {
    if (!(v->real > 0)) return make_error(ErrorCode::invalid_argument, arch + ".attention.scale must be positive");
    c.attention_scale = float(v->real);
  }
  return Ok{};
}

// What llama.cpp reads of the layer configs and of Gemma's attention: RoPE bases (full and
// sliding), linear scaling, the window and its pattern, softcaps, and the score scale when
// llama.cpp's rule would not give it. Refuses what a GGUF reader could not get back.
Status put_layer_metadata(const Model& m, const Family& family, const std::string& arch, std::map<std::string, GgufValue>& meta) {
  const ModelConfig& c = m.config;
  auto u32 = [](size_t v) { return GgufValue::of(GgufValueType::u32, double(v)); };
  auto f32 = [](double v) { return GgufValue::of(GgufValueType::f32, v); };
  auto fail = [&](const std::string& what) { return make_error(ErrorCode::invalid_argument, "export_gguf: " + what); };
  const LayerConfig* full = nullptr;
  const LayerConfig* sliding = nullptr;
  for (const LayerConfig& l : c.layer_configs) {
    const LayerConfig*& first = l.attention == AttentionKind::full ? full : sliding;
    if (!first) first = &l;
    if (l.rope.theta != first->rope.theta || l.rope.linear_factor != first->rope.linear_factor || l.window != first->window ||
        l.rope.rotated_pairs != first->rope.rotated_pairs || l.head_dim != first->head_dim)
      return fail("layers of one attention kind with different RoPE, windows or head sizes cannot be written to GGUF");
  }
  if (sliding && sliding->rope.rotated_pairs) return fail("llama.cpp has no partial RoPE on sliding-window layers");
  if (full && full->rope.rotated_pairs && !family.gemma4_attention) return fail(arch + " has no proportional RoPE in llama.cpp");
  // Head sizes and KV heads: Gemma 4's full layers differ (key_length) from its sliding ones
  // (key_length_swa); KV heads become one entry per layer when they differ.
  if (full && full->head_dim != (sliding ? sliding->head_dim : c.head_dim)) {
    for (const char* key : {".attention.key_length", ".attention.value_length", ".rope.dimension_count"}) {
      meta[arch + key] = u32(full->head_dim);
      if (sliding) meta[arch + key + std::string("_swa")] = u32(sliding->head_dim);
    }
  }
  std::vector<double> kv_heads;
  for (const LayerConfig& l : c.layer_configs) kv_heads.push_back(double(l.kv_heads));
  if (std::any_of(kv_heads.begin(), kv_heads.end(), [&](double k) { return k != kv_heads[0]; }))
    meta[arch + ".attention.head_count_kv"] = GgufValue::of_array(GgufValueType::u32, kv_heads);
  else
    meta[arch + ".attention.head_count_kv"] = u32(size_t(kv_heads[0]));  // (a Gemma 4 of full layers only: theirs)
  const LayerConfig& base = full ? *full : *sliding;
  meta[arch + ".rope.freq_base"] = f32(base.rope.theta);
  if (base.rope.linear_factor != 1.0f) {
    meta[arch + ".rope.scaling.type"] = GgufValue::of_string("linear");
    meta[arch + ".rope.scaling.factor"] = f32(base.rope.linear_factor);
  }
  if (const auto& yarn = base.rope.yarn) {
    if (yarn->truncate == (family.name == "gpt_oss"))
      return fail("a GGUF reader would not get this YaRN ramp back (" + arch + (yarn->truncate ? " reads it untruncated)" : " reads it truncated)"));
    meta[arch + ".rope.scaling.type"] = GgufValue::of_string("yarn");
    meta[arch + ".rope.scaling.factor"] = f32(yarn->factor);
    meta[arch + ".rope.scaling.original_context_length"] = u32(size_t(yarn->original_max_position));
    meta[arch + ".rope.scaling.yarn_beta_fast"] = f32(yarn->beta_fast);
    meta[arch + ".rope.scaling.yarn_beta_slow"] = f32(yarn->beta_slow);
    if (yarn->attention_factor > 0) meta[arch + ".rope.scaling.yarn_attn_factor"] = f32(yarn->attention_factor);
  }
  if (sliding) {
    if (family.sliding_period == 0) return fail(arch + " has no sliding-window layers in llama.cpp");
    if (sliding->rope.linear_factor != 1.0f) return fail("llama.cpp does not scale RoPE on sliding-window layers");
    meta[arch + ".rope.freq_base_swa"] = f32(sliding->rope.theta);
    meta[arch + ".attention.sliding_window"] = u32(sliding->window);
  }
  // Which layers slide, where a reader's default (the family's period) would not say it
  // (Gemma 4's files always carry it, as llama.cpp reads it).
  if (family.sliding_period) {
    bool periodic = true;
    std::vector<double> pattern;
    for (size_t l = 0; l < c.layers; ++l) {
      periodic &= c.layer_configs[l].attention == periodic_attention_kind(l, family.sliding_period);
      pattern.push_back(c.layer_configs[l].attention == AttentionKind::sliding);
    }
    if (!periodic || family.gemma4_attention)
      meta[arch + ".attention.sliding_window_pattern"] = GgufValue::of_array(GgufValueType::boolean, pattern);
  }
  if (c.attention_softcap > 0) meta[arch + ".attn_logit_softcapping"] = f32(c.attention_softcap);
  if (c.final_softcap > 0) meta[arch + ".final_logit_softcapping"] = f32(c.final_softcap);
  if (family.norms == NormPlacement::sandwich && !family.gemma4_attention &&
      c.score_scale() != 1.0f / std::sqrt(float(llama_cpp_gemma_scalar(family, c))))
    meta[arch + ".attention.scale"] = f32(c.score_scale());
  return Ok{};
}

// The family's GGUF name for a tensor the table names (GPT-OSS keeps post_attention_norm
// for the norm before its FFN).
std::string stored_gguf_name(const Family& family, const std::string& name) {
  static const std::string kFfnNorm = ".ffn_norm.weight";
  if (family.gguf_ffn_norm == "ffn_norm" || !name.ends_with(kFfnNorm)) return name;
  return name.substr(0, name.size() - kFfnNorm.size()) + "." + std::string(family.gguf_ffn_norm) + ".weight";
}

// Whether some family of this GGUF architecture has experts (llama: Mixtral).
bool arch_has_experts(const std::string& arch) {
  for (const Family& f : kFamilies)
    if (f.gguf_arch == arch && f.moe) return true;
  return false;
}

// Layers this loader would read as a dense model's and compute wrongly, refused by the key
// or tensor that makes them so: mixture-of-experts tensors where the family has no experts
// in the table or the file no expert_count (a Gemma 4 file with routers but no count would
// run as its dense part alone), and Gemma 4's E models' keys (per-layer embeddings, layers
// that share another's KV cache) in a family without them.
std::optional<std::string> unsupported_layer_kind(const GgufFile& f, const std::string& arch, const Family& family) {
  const GgufValue* experts = f.number(arch + ".expert_count");
  const bool has_experts = experts && experts->integer > 0;
  if (has_experts && !family.moe)
    return arch + ".expert_count is " + std::to_string(experts->integer) + ": mixture-of-experts " + arch +
           " files are not supported yet (expected a dense model)";
  for (const auto& [name, t] : f.tensors) {
    if (has_experts) break;
    // ffn_gate_inp is the router; *_exps the stacked experts; old Mixtral files name each
    // expert's 2-D tensor blk.N.ffn_gate.E.weight.
    const bool per_expert = name.starts_with("blk.") && std::count(name.begin(), name.end(), '.') == 4 &&
                            name.find(".ffn_") != std::string::npos;
    if (name.find(".ffn_gate_inp.") != std::string::npos || name.find("_exps.") != std::string::npos || per_expert)
      return "tensor '" + name + "' is a mixture-of-experts tensor" +
             (arch_has_experts(arch) ? ", but " + arch + ".expert_count is missing"
                                     : ": mixture-of-experts " + arch + " files are not supported yet (expected a dense model)");
  }
  if (family.gemma4_attention) return std::nullopt;
  for (const char* key : {".embedding_length_per_layer_input", ".attention.shared_kv_layers"})
    if (const GgufValue* v = f.find(arch + key); v && (v->type == GgufValueType::array || v->integer != 0))
      return arch + key + " is set: per-layer embeddings and shared KV layers are Gemma 4's (the E models), not " + arch + "'s";
  if (f.tensors.count("per_layer_token_embd.weight"))
    return "tensor 'per_layer_token_embd.weight' is a per-layer embedding (Gemma 4's E models), not " + arch + "'s";
  return std::nullopt;
}

}  // namespace

Result<ModelConfig> gguf_model_config(const GgufFile& f, const std::string& source) {
  auto fail = [&](const std::string& what) { return make_error(ErrorCode::invalid_argument, source + ": " + what); };
  const GgufValue* arch_value = f.find("general.architecture");
  if (!arch_value || arch_value->type != GgufValueType::string) return fail("general.architecture is missing");
  const std::string arch = arch_value->text;
  const Family* family = find_gguf_family(arch);
  if (!family) return fail("architecture '" + arch + "' is not supported; expected " + family_names(true));

  auto number = [&](const std::string& key) { return f.number(arch + "." + key); };
  // llama.cpp writes Mixtral as a Llama with experts; its tensors without expert_count are
  // refused below as a llama's.
  if (const GgufValue* v = number("expert_count"); v && v->integer > 0 && !family->moe)
    if (const Family* moe = find_family("mixtral"); moe && moe->gguf_arch == arch) family = moe;
  if (auto what = unsupported_layer_kind(f, arch, *family)) return fail(*what);
  auto need = [&](const std::string& key, size_t& out) -> Status {
    const GgufValue* v = number(key);
    if (!v || v->integer <= 0 || v->integer > (int64_t(1) << 32))
      return fail(arch + "." + key + " must be a positive integer" +
                  (f.find(arch + "." + key) ? " (per-layer arrays are not supported for " + arch + ")" : ""));
    out = size_t(v->integer);
    return Ok{};
  };
  ModelConfig c;
  c.name = std::filesystem::path(source).filename().string();
  c.family = std::string(family->name);
  for (auto [key, out] : {std::pair{"embedding_length", &c.hidden}, {"block_count", &c.layers},
                          {"attention.head_count", &c.heads}, {"context_length", &c.context}})
    if (auto s = need(key, *out); !s) return s.error();
  // Every layer has tensors of its own: a count beyond the file's is a corrupt header, refused
  // here before anything is sized by it.
  if (c.layers > f.tensors.size())
    return fail(arch + ".block_count is " + std::to_string(c.layers) + " but the file has only " +
                std::to_string(f.tensors.size()) + " tensors");
  // FFN width: one number, or (Gemma 4 E2B: double-wide KV-shared layers) one per layer.
  std::vector<size_t> ffn_widths;
  if (const GgufValue* v = f.find(arch + ".feed_forward_length"); v && v->type == GgufValueType::array && family->gemma4_attention) {
    if (v->count() != c.layers || v->element == GgufValueType::string)
      return fail(arch + ".feed_forward_length has " + std::to_string(v->count()) + " entries for " + std::to_string(c.layers) + " layers");
    for (size_t l = 0; l < c.layers; ++l) {
      const int64_t n = v->integer_at(l);
      if (n <= 0 || n > (int64_t(1) << 32)) return fail(arch + ".feed_forward_length has an entry that is not a positive integer");
      ffn_widths.push_back(size_t(n));
    }
    c.ffn = ffn_widths[0];
  } else if (auto s = need("feed_forward_length", c.ffn); !s) {
    return s.error();
  }
  // KV heads: one number, or one per layer (Gemma 4's full layers have fewer).
  c.kv_heads = c.heads;
  std::vector<size_t> kv_heads;
  if (const GgufValue* v = f.find(arch + ".attention.head_count_kv"); v && v->type == GgufValueType::array) {
    if (v->count() != c.layers || v->element == GgufValueType::string)
      return fail(arch + ".attention.head_count_kv has " + std::to_string(v->count()) + " entries for " + std::to_string(c.layers) + " layers");
    for (size_t l = 0; l < c.layers; ++l) {
      const int64_t n = v->integer_at(l);
      if (n <= 0 || c.heads % size_t(n) != 0) return fail(arch + ".attention.head_count_kv has an entry that does not divide head_count");
      kv_heads.push_back(size_t(n));
    }
    c.kv_heads = kv_heads[0];
  } else if (number("attention.head_count_kv")) {
    if (auto s = need("attention.head_count_kv", c.kv_heads); !s) return s.error();
  }
  if (kv_heads.empty()) kv_heads.assign(c.layers, c.kv_heads);
  // Head size: key_length (Gemma 4: of full layers, key_length_swa of sliding ones).
  c.head_dim = c.hidden / c.heads;
  if (number("attention.key_length"))
    if (auto s = need("attention.key_length", c.head_dim); !s) return s.error();
  const size_t full_head_dim = c.head_dim;
  if (number("attention.key_length_swa"))
    if (auto s = need("attention.key_length_swa", c.head_dim); !s) return s.error();
  if (c.heads % c.kv_heads != 0 || c.head_dim == 0 || c.head_dim % 2 != 0 || full_head_dim % 2 != 0)
    return fail("head_count must be a multiple of head_count_kv, and the head size even and positive");
  if (const GgufValue* v = number("attention.layer_norm_rms_epsilon")) c.norm_eps = float(v->real);
  c.rope_layout = family->gguf_permutes_qk ? RopeLayout::adjacent_pairs : RopeLayout::half_split;
  c.attention_bias = family->attention_bias;
  c.qk_norm = family->qk_norm;
  c.norm_placement = family->norms;
  c.activation = family->activation;  // GGUF files store norm weights as used: no offset
  if (c.activation == Activation::swiglu_clamped) c.swiglu_limit = 7.0f;  // llama.cpp's, which GGUF does not store
  c.attention_sinks = family->attention_sinks;
  if (family->scaled_embedding) c.embedding_scale = std::sqrt(float(c.hidden));  // llama.cpp: exact, unrounded
  if (auto s = gemma_attention(f, arch, *family, c); !s) return fail(s.error().message);
  if (const GgufValue* v = number("attn_logit_softcapping")) c.attention_softcap = float(v->real);
  if (const GgufValue* v = number("final_logit_softcapping")) c.final_softcap = float(v->real);

  // RoPE: freq_base on full layers (with linear scaling, if any), freq_base_swa on sliding ones.
  RopeSpec full;  // base 10000 unless the file says
  if (const GgufValue* v = number("rope.freq_base")) full.theta = float(v->real);
  if (const GgufValue* v = f.find(arch + ".rope.scaling.type"); v && v->text != "none" && !v->text.empty()) {
    const GgufValue* factor = number("rope.scaling.factor");
    if ((v->text != "linear" && v->text != "yarn") || !factor || !(factor->real > 0))
      return fail(arch + ".rope.scaling.type '" + v->text + "' is not supported; expected linear or yarn with a positive " + arch +
                  ".rope.scaling.factor (Llama 3's scaling comes as the rope_freqs tensor)");
    if (v->text == "linear") full.linear_factor = float(factor->real);
    else {
      // YaRN: transformers' rule for GPT-OSS (its config's truncate: false), llama.cpp's
      // (the ramp's ends floored and ceiled) for the rest.
      YarnRopeScaling yarn;
      yarn.factor = float(factor->real);
      const GgufValue* original = number("rope.scaling.original_context_length");
      yarn.original_max_position = original && original->real > 0 ? float(original->real) : float(c.context);
      if (const GgufValue* b = number("rope.scaling.yarn_beta_fast"); b && b->real > 0) yarn.beta_fast = float(b->real);
      if (const GgufValue* b = number("rope.scaling.yarn_beta_slow"); b && b->real > 0) yarn.beta_slow = float(b->real);
      if (const GgufValue* a = number("rope.scaling.yarn_attn_factor"); a && a->real > 0) yarn.attention_factor = float(a->real);
      yarn.truncate = family->name != "gpt_oss";
      full.yarn = yarn;
    }
  }
  // llama.cpp: Gemma 3's sliding layers use base 10000 unscaled unless the file says
  // otherwise; other families' turn as their full layers do (GPT-OSS: YaRN on both).
  RopeSpec sliding = family->name == "gemma3_text" ? RopeSpec{} : full;
  sliding.linear_factor = 1.0f;
  sliding.theta = family->name == "gemma3_text" ? 10000.0f : full.theta;
  if (const GgufValue* v = number("rope.freq_base_swa")) sliding.theta = float(v->real);
  sliding.freq_factors = !family->gemma4_attention;  // Gemma 4's rope_freqs is its full layers' proportional RoPE
  if (auto s = layer_kinds(f, arch, *family, c, full, sliding, kv_heads, full_head_dim); !s) return fail(s.error().message);
  for (size_t l = 0; l < ffn_widths.size(); ++l)
    if (ffn_widths[l] != c.ffn) c.layer_configs[l].ffn = ffn_widths[l];
  if (family->gemma4_attention)
    if (auto s = e_model_config(f, arch, c); !s) return fail(s.error().message);
  // Gemma 4 files are mixtures of experts only with expert_count (the 26B-A4B).
  if (family->moe && (!family->moe->beside_dense || number("expert_count"))) {
    // The experts' width is expert_feed_forward_length, else llama.cpp's fallback for the
    // family (MoeNames::gguf_width_per_expert_used).
    MoeSpec& moe = c.moe;
    if (auto s = need("expert_count", moe.experts); !s) return s.error();
    if (auto s = need("expert_used_count", moe.experts_used); !s) return s.error();
    if (moe.experts_used > moe.experts)
      return fail(arch + ".expert_used_count is " + std::to_string(moe.experts_used) + "; expected at most " + arch +
                  ".expert_count (" + std::to_string(moe.experts) + ")");
    moe.expert_ffn = family->moe->gguf_width_per_expert_used ? c.ffn / moe.experts_used : c.ffn;
    if (number("expert_feed_forward_length"))
      if (auto s = need("expert_feed_forward_length", moe.expert_ffn); !s) return s.error();
    // Qwen2-MoE's shared expert: expert_shared_feed_forward_length wide, else (llama.cpp) feed_forward_length.
    if (!family->moe->hf_shared_expert.empty()) {
      moe.shared_experts = 1;
      moe.shared_expert_ffn = c.ffn;
      if (number("expert_shared_feed_forward_length"))
        if (auto s = need("expert_shared_feed_forward_length", moe.shared_expert_ffn); !s) return s.error();
    }
    moe.weights = family->moe->gguf_weights;
    moe.beside_dense = family->moe->beside_dense;
    // A layer is sparse when it has a router (larql writes Qwen3-MoE's dense layers without).
    for (size_t l = 0; l < c.layers; ++l) c.layer_configs[l].sparse = f.tensors.count(gguf_router_name(l)) > 0;
  }
  auto id = [&](const char* key) { return int(f.integer_or(key, -1)); };
  c.bos_id = id("tokenizer.ggml.bos_token_id");
  if (int eos = id("tokenizer.ggml.eos_token_id"); eos >= 0) c.eos_ids.push_back(eos);
  if (int eot = id("tokenizer.ggml.eot_token_id"); eot >= 0 && (c.eos_ids.empty() || c.eos_ids[0] != eot)) c.eos_ids.push_back(eot);
  // The vocabulary is the embedding's row count.
  auto embed = f.tensors.find("token_embd.weight");
  if (embed == f.tensors.end() || embed->second.shape.size() != 2) return fail("tensor 'token_embd.weight' is missing or not 2-D");
  c.vocab = embed->second.shape[0];
  return c;
}

Result<Model> load_gguf(const std::string& path) {
  auto file = read_gguf(path);
  if (!file) return file.error();
  auto config = gguf_model_config(*file, path);
  if (!config) return config.error();
  Model m;
  m.config = *config;
  m.files = file->files;
  const Family& family = *find_family(m.config.family);
  auto status = assemble_model(m, CheckpointFormat::gguf, path, [&](const std::string& name) -> std::optional<FoundTensor> {
    auto it = file->tensors.find(stored_gguf_name(family, name));
    if (it == file->tensors.end()) return std::nullopt;
    const GgufTensor& t = it->second;
    return FoundTensor{t.dtype, ggml_type_name(t.ggml_type), t.shape, t.data, t.file};
  });
  if (!status) return status.error();
  return m;
}

Result<std::vector<std::string>> export_gguf(const Model& m, const std::string& path, const GgufExport& options) {
  const ModelConfig& c = m.config;
  const Family* family = find_family(c.family);
  if (!family) return make_error(ErrorCode::invalid_argument, "export_gguf: family '" + c.family + "' has no GGUF architecture");
  const std::string arch(family->gguf_arch);
  std::map<std::string, GgufValue> meta = options.tokenizer_metadata;
  if (options.tokenizer_json) {
    std::ifstream in(*options.tokenizer_json);
    const nlohmann::json doc = nlohmann::json::parse(in, nullptr, false);
    if (doc.is_discarded() || !doc.is_object())
      return make_error(ErrorCode::invalid_argument, *options.tokenizer_json + " is not a JSON object");
    auto tok = gguf_tokenizer_metadata(doc, *options.tokenizer_json, family->gemma4_attention);
    if (!tok) return tok.error();
    meta = std::move(*tok);
  }
  auto u32 = [](size_t v) { return GgufValue::of(GgufValueType::u32, double(v)); };
  auto f32 = [](double v) { return GgufValue::of(GgufValueType::f32, v); };
  meta["general.architecture"] = GgufValue::of_string(arch);
  meta["general.name"] = GgufValue::of_string(c.name);
  meta["general.file_type"] = u32(options.scheme.llama_ftype);
  meta[arch + ".context_length"] = u32(c.context);
  meta[arch + ".embedding_length"] = u32(c.hidden);
  meta[arch + ".block_count"] = u32(c.layers);
  std::vector<double> ffn_widths;
  for (size_t l = 0; l < c.layers; ++l) ffn_widths.push_back(double(c.ffn_width(l)));
  if (std::any_of(ffn_widths.begin(), ffn_widths.end(), [&](double w) { return w != double(c.ffn); }))
    meta[arch + ".feed_forward_length"] = GgufValue::of_array(GgufValueType::u32, ffn_widths);
  else
    meta[arch + ".feed_forward_length"] = u32(c.ffn);
  if (c.ple_dim) meta[arch + ".embedding_length_per_layer_input"] = u32(c.ple_dim);
  const auto shared = std::count_if(c.layer_configs.begin(), c.layer_configs.end(), [](const LayerConfig& l) { return l.kv_from.has_value(); });
  if (shared)
    meta[arch + ".attention.shared_kv_layers"] = u32(shared);
  meta[arch + ".attention.head_count"] = u32(c.heads);
  meta[arch + ".attention.head_count_kv"] = u32(c.kv_heads);
  meta[arch + ".attention.key_length"] = u32(c.head_dim);
  meta[arch + ".attention.value_length"] = u32(c.head_dim);
  meta[arch + ".rope.dimension_count"] = u32(c.head_dim);
  if (auto s = put_layer_metadata(m, *family, arch, meta); !s) return s.error();
  meta[arch + ".attention.layer_norm_rms_epsilon"] = f32(c.norm_eps);
  meta[arch + ".vocab_size"] = u32(c.vocab);
  if (c.bos_id >= 0) meta["tokenizer.ggml.bos_token_id"] = u32(size_t(c.bos_id));
  if (!c.eos_ids.empty()) meta["tokenizer.ggml.eos_token_id"] = u32(size_t(c.eos_ids[0]));

  if (c.moe.experts) {
    meta[arch + ".expert_count"] = u32(c.moe.experts);
    meta[arch + ".expert_used_count"] = u32(c.moe.experts_used);
    meta[arch + ".expert_feed_forward_length"] = u32(c.moe.expert_ffn);
    if (c.moe.shared_experts) meta[arch + ".expert_shared_feed_forward_length"] = u32(c.moe.shared_expert_ffn);
  }

  const bool permute = family->gguf_permutes_qk && c.rope_layout == RopeLayout::half_split;
  const bool tied = m.classifier.data == m.embed.data;
  size_t count = 0;
  for_each_tensor(m, [&](const TensorEntry&, size_t, const Matrix&) { ++count; });
  for (size_t l = 0; l < c.layers; ++l)  // router, gate, up, down, and GPT-OSS's four biases
    count += c.layer(l).sparse ? (m.layers[l].router_bias.data ? 8 : 4) + 3 * c.moe.shared_experts : 0;
  std::vector<GgufTensorToWrite> tensors;
  // A tensor of `rows` rows of `cols` values, row r's values from `row`, written as `type`.
  auto write_tensor = [&](const std::string& name, DType type, std::vector<size_t> shape, size_t rows, size_t cols,
                          const std::function<void(size_t r, float* values)>& row) {
    GgufTensorToWrite t{name, type, std::move(shape), {}};
    const size_t row_bytes = dtype_bytes(type, cols);
    t.bytes.resize(row_bytes * rows);
    // Each row quantised, then read back for the error; sums kept per row so that the
    // totals do not depend on the thread count.
    std::vector<double> row_error(rows), row_values(rows);
    auto some_rows = [&](size_t begin, size_t end) {
      std::vector<float> x(cols), back(cols);
      for (size_t r = begin; r < end; ++r) {
        row(r, x.data());
        blocks::quantize_row(type, x.data(), cols, &t.bytes[r * row_bytes]);
        dequantize_row(type, &t.bytes[r * row_bytes], cols, back.data());
        for (size_t i = 0; i < cols; ++i) {
          row_error[r] += (double(back[i]) - x[i]) * (double(back[i]) - x[i]);
          row_values[r] += double(x[i]) * x[i];
        }
      }
    };
    if (options.pool) options.pool->parallel_for(rows, some_rows, 16);
    else some_rows(0, rows);
    if (options.progress) {
      TensorWritten done{t.name, type, t.shape, tensors.size(), count};
      for (size_t r = 0; r < rows; ++r) {
        done.squared_error += row_error[r];
        done.squared_values += row_values[r];
      }
      options.progress(done);
    }
    tensors.push_back(std::move(t));
  };
  for_each_tensor(m, [&](const TensorEntry& e, size_t layer, const Matrix& w) {
    std::vector<float> values(w.rows * w.cols);
    for (size_t r = 0; r < w.rows; ++r) dequantize_row(w.dtype, w.row_ptr(r), w.cols, &values[r * w.cols]);
    // GGUF stores norm weights as used (llama.cpp's converter adds HF Gemma's +1).
    if (is_norm_weight(e) && c.norm_weight_offset != 0)
      for (float& v : values) v += c.norm_weight_offset;
    // llama.cpp's converter stores these rows in the adjacent order, for its adjacent-pair RoPE.
    if (permute && e.layer_member == &LayerWeights::wq) values = reorder_rope_rows(values, c.heads, c.head_dim, w.cols, RopeLayout::adjacent_pairs);
    if (permute && e.layer_member == &LayerWeights::wk) values = reorder_rope_rows(values, c.kv_heads, c.head_dim, w.cols, RopeLayout::adjacent_pairs);
    // The per-layer table's rows are read a layer's part at a time: its blocks must divide a part.
    const size_t block_cols = e.model_member == &Model::ple_embed ? c.ple_dim : w.cols;
    const DType type = w.rows == 1 ? DType::f32 : matrix_type(options.scheme, e, layer, c.layers, block_cols, tied, options.pure, c.moe.experts);
    write_tensor(stored_gguf_name(*family, tensor_name(e, CheckpointFormat::gguf, layer)), type, tensor_shape(e, c, layer), w.rows, w.cols,
                 [&](size_t r, float* x) { std::copy_n(&values[r * w.cols], w.cols, x); });
  });
  // Mixture-of-experts layers as llama.cpp's converter writes them: the router in f32 (never
  // quantised), each role's experts stacked [experts][rows][cols]. A layer without a
  // router has a dense FFN (Qwen3-MoE's mlp_only_layers; llama.cpp's qwen3moe has none).
  const size_t E = c.moe.experts;
  for (size_t l = 0; l < c.layers; ++l) {
    if (!c.layer(l).sparse) continue;
    const LayerWeights& lw = m.layers[l];
    write_tensor(gguf_router_name(l), DType::f32, {E, c.hidden}, E, c.hidden,
                 [&](size_t r, float* x) { dequantize_row(lw.router.dtype, lw.router.row_ptr(r), c.hidden, x); });
    // GPT-OSS's biases, f32 as llama.cpp keeps them: the router's, and each role's [experts][rows].
    if (lw.router_bias.data)
      write_tensor(gguf_router_bias_name(l), DType::f32, {E}, 1, E,
                   [&](size_t, float* x) { dequantize_row(lw.router_bias.dtype, lw.router_bias.data, E, x); });
    for (ExpertRole role : {ExpertRole::gate, ExpertRole::up, ExpertRole::down}) {
      Matrix ExpertWeights::*bias = expert_bias(role);
      if (!(lw.experts[0].*bias).data) continue;
      const size_t width = role == ExpertRole::down ? c.hidden : c.moe.expert_ffn;
      write_tensor(gguf_stacked_bias_name(l, role), DType::f32, {E, width}, E, width, [&](size_t r, float* x) {
        const Matrix& b = lw.experts[r].*bias;
        dequantize_row(b.dtype, b.data, width, x);
      });
    }
    for (ExpertRole role : {ExpertRole::gate, ExpertRole::up, ExpertRole::down}) {
      const bool down = role == ExpertRole::down;
      const size_t rows = down ? c.hidden : c.moe.expert_ffn, cols = down ? c.moe.expert_ffn : c.hidden;
      Matrix ExpertWeights::*member = expert_matrix(role);
      write_tensor(gguf_stacked_name(l, role), expert_matrix_type(options.scheme, down, l, c.layers, cols, options.pure), {E, rows, cols},
                   E * rows, cols, [&](size_t r, float* x) {
                     const Matrix& w = lw.experts[r / rows].*member;
                     dequantize_row(w.dtype, w.row_ptr(r % rows), cols, x);
                   });
    }
    // Qwen2-MoE's shared expert, typed as llama.cpp types it (its ffn_down_shexp is an ffn_down).
    for (size_t s = 0; s < c.moe.shared_experts; ++s)
      for (ExpertRole role : {ExpertRole::gate, ExpertRole::up, ExpertRole::down}) {
        const Matrix& w = lw.experts[E + s].*expert_matrix(role);
        write_tensor(gguf_shared_expert_name(l, role), expert_matrix_type(options.scheme, role == ExpertRole::down, l, c.layers, w.cols, options.pure),
                     {w.rows, w.cols}, w.rows, w.cols, [&](size_t r, float* x) { dequantize_row(w.dtype, w.row_ptr(r), w.cols, x); });
      }
  }
  // rope_freqs: Llama 3's frequency divisors, or Gemma 4's proportional RoPE as llama.cpp's
  // converter writes it (1 for the pairs that turn, 1e30 for the rest: their angle ≈ 0).
  std::vector<float> divisors;
  if (c.layer_configs.at(0).rope.llama3) divisors = llama3_rope_divisors(c);
  for (const LayerConfig& l : c.layer_configs)
    if (l.rope.rotated_pairs && divisors.empty())
      for (size_t i = 0; i < l.head_dim / 2; ++i) divisors.push_back(i < l.rope.rotated_pairs ? 1.0f : 1e30f);
  if (!divisors.empty()) {
    GgufTensorToWrite t{"rope_freqs.weight", DType::f32, {divisors.size()}, std::vector<uint8_t>(divisors.size() * 4)};
    std::memcpy(t.bytes.data(), divisors.data(), t.bytes.size());
    tensors.push_back(std::move(t));
  }
  return write_gguf(path, meta, tensors, options.splits);
}

}  // namespace larql
