#include "model/synth.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <tuple>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "model/expert_tensors.h"
#include "model/families.h"
#include "model/kv_sharing.h"
#include "model/gpt_oss_experts.h"
#include "model/safetensors.h"
#include "model/tensor_names.h"
#include "kernels/block_formats.h"

namespace larql {
namespace {

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t name_hash(const std::string& s) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// Uniform values with the variance of N(0, 1/fan_in), so activations stay O(1) through
// many layers; norm weights are 1.
std::vector<float> random_values(size_t count, size_t fan_in, uint64_t seed) {
  std::vector<float> v(count);
  const float bound = std::sqrt(3.0f / float(fan_in));
  uint64_t state = seed;
  for (float& x : v) x = (float(splitmix64(state) >> 40) / float(1ull << 24) * 2.0f - 1.0f) * bound;
  return v;
}

// Byte-level BPE vocabulary: GPT-2's printable mapping of the 256 bytes.
std::string byte_level_char(unsigned b) {
  unsigned cp = b;
  if (!((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255))) {
    unsigned n = 0;
    for (unsigned x = 0; x < b; ++x)
      if (!((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || (x >= 174 && x <= 255))) ++n;
    cp = 256 + n;
  }
  std::string out;
  if (cp < 0x80) {
    out += char(cp);
  } else {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  }
  return out;
}

// Gemma 4's tokenizers are SentencePiece-style (byte fallback), which its GGUF files
// require: then each byte is a "<0xNN>" token, and text outside the vocabulary falls back to them.
nlohmann::json tokenizer_json(size_t vocab, bool sentencepiece_style) {
  nlohmann::json v = nlohmann::json::object();
  for (unsigned b = 0; b < 256 && b < vocab; ++b) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "<0x%02X>", b);
    v[sentencepiece_style ? std::string(hex) : byte_level_char(b)] = b;
  }
  for (size_t i = 256; i < vocab; ++i) v["<|synth_" + std::to_string(i) + "|>"] = i;
  if (sentencepiece_style)
    return {{"version", "1.0"},
            {"added_tokens", nlohmann::json::array()},
            {"normalizer", {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\u2581"}}},
            {"pre_tokenizer", nullptr},
            {"post_processor", nullptr},
            {"decoder", {{"type", "Sequence"}, {"decoders", {{{"type", "ByteFallback"}}, {{"type", "Fuse"}}}}}},
            {"model", {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"continuing_subword_prefix", nullptr},
                       {"end_of_word_suffix", nullptr}, {"fuse_unk", false}, {"byte_fallback", true},
                       {"vocab", v}, {"merges", nlohmann::json::array()}}}};
  return {{"version", "1.0"},
          {"added_tokens", nlohmann::json::array()},
          {"normalizer", nullptr},
          {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}}},
          {"post_processor", nullptr},
          {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}}},
          {"model", {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"continuing_subword_prefix", nullptr},
                     {"end_of_word_suffix", nullptr}, {"fuse_unk", false}, {"byte_fallback", false},
                     {"vocab", v}, {"merges", nlohmann::json::array()}}}};
}

}  // namespace

std::vector<std::pair<size_t, float>> massive_coordinates(const SynthSpec& s) {
  static constexpr float kFactors[] = {100, 300, 600, 1000};
  std::vector<std::pair<size_t, float>> out;
  const size_t n = std::min(s.massive_activations, s.hidden);
  for (size_t i = 0; i < n; ++i) out.emplace_back((7 + i * s.hidden / n) % s.hidden, kFactors[i % 4]);
  return out;
}

namespace {

// --reachable-experts (SynthSpec): which tensors carry the constant coordinate 0 and the
// routers' preference.
enum class RoutingSteer { none, embedding, residual_writer, router };

void steer_routing(RoutingSteer steer, const std::vector<size_t>& shape, size_t reachable, std::vector<float>& values) {
  const size_t cols = shape.back(), rows = shape.size() > 1 ? shape[shape.size() - 2] : 1;
  switch (steer) {
    case RoutingSteer::none:
      return;
    case RoutingSteer::embedding:  // [vocab][hidden]: every token's coordinate 0
      for (size_t t = 0; t < rows; ++t) values[t * cols] = std::sqrt(float(cols));
      return;
    case RoutingSteer::residual_writer:  // [(experts)][hidden][width]: nothing written to coordinate 0
      for (size_t slab = 0; slab < values.size(); slab += rows * cols) std::fill_n(values.begin() + slab, cols, 0.0f);
      return;
    case RoutingSteer::router:  // [experts][hidden]
      for (size_t e = 0; e < rows; ++e) values[e * cols] = e < reachable ? 4.0f : -4.0f;
      return;
  }
}

// config.json for the spec's family, and the ModelConfig its tensors follow.
Result<std::pair<nlohmann::json, ModelConfig>> synth_config(const SynthSpec& s) {
  const bool gemma4_moe = s.family == "gemma4moe";  // the 26B-A4B kind: experts beside the dense MLP
  const bool gemma4 = s.family == "gemma4" || gemma4_moe;
  const Family* family = find_family(s.family == "gemma3" || gemma4 ? (gemma4 ? "gemma4" : s.family) + std::string("_text")
                                     : s.family == "qwen3moe" ? "qwen3_moe" : s.family == "qwen2moe" ? "qwen2_moe"
                                     : s.family == "gpt-oss" ? "gpt_oss" : s.family);
  if (!family || (s.family != "llama" && s.family != "gemma2" && s.family != "gemma3" && !gemma4 && !family->moe))
    return make_error(ErrorCode::invalid_argument,
                      "synth: family '" + s.family + "' is not one of llama, gemma2, gemma3, gemma4, gemma4moe, mixtral, qwen3moe, qwen2moe, gpt-oss");
  if (s.dtype == DType::mxfp4 && s.family != "gpt-oss")
    return make_error(ErrorCode::invalid_argument, "synth: --dtype mxfp4 is gpt-oss's (its experts); other families take f32, f16 or bf16");
  if (s.dtype != DType::f32 && s.dtype != DType::f16 && s.dtype != DType::bf16 && s.dtype != DType::mxfp4)
    return make_error(ErrorCode::invalid_argument, "synth: --dtype must be f32, f16, bf16 or (gpt-oss) mxfp4");
  if (s.sliding_period && !s.family.starts_with("gemma"))
    return make_error(ErrorCode::invalid_argument, "synth: --sliding-period is the Gemma families'");
  if ((s.ple_dim || s.kv_shared || s.double_wide || s.separate_values) && !gemma4)
    return make_error(ErrorCode::invalid_argument,
                      "synth: --ple, --kv-shared, --double-wide and --separate-values are Gemma 4's (gemma4, gemma4moe)");
  if (s.experts == 0 || s.experts_used == 0 || s.experts_used > s.experts)
    return make_error(ErrorCode::invalid_argument, "synth: --experts-used must be between 1 and --experts");
  if (s.reachable_experts && (s.family != "mixtral" && s.family != "qwen3moe"))
    return make_error(ErrorCode::invalid_argument, "synth: --reachable-experts is mixtral's and qwen3moe's");
  if (s.reachable_experts && (s.reachable_experts < s.experts_used || s.reachable_experts > s.experts))
    return make_error(ErrorCode::invalid_argument, "synth: --reachable-experts must be between --experts-used and --experts");
  const size_t expert_ffn = s.expert_ffn ? s.expert_ffn : s.ffn;
  const size_t head_dim = s.head_dim ? s.head_dim : s.hidden / s.heads;
  const int eos = int(s.vocab - 1);
  nlohmann::json config{{"model_type", family->name},
                        {"hidden_size", s.hidden},      {"intermediate_size", s.ffn},
                        {"num_hidden_layers", s.layers}, {"num_attention_heads", s.heads},
                        {"num_key_value_heads", s.kv_heads}, {"head_dim", head_dim}, {"vocab_size", s.vocab},
                        {"max_position_embeddings", s.context}, {"eos_token_id", eos},
                        {"torch_dtype", s.dtype == DType::bf16 ? "bfloat16" : s.dtype == DType::f16 ? "float16" : "float32"},
                        {"larql_synthetic", {{"seed", s.seed}, {"massive_activations", s.massive_activations}, {"reachable_experts", s.reachable_experts}}}};
  ModelConfig c;
  c.family = family->name;
  c.hidden = s.hidden;
  c.ffn = s.ffn;
  c.layers = s.layers;
  c.heads = s.heads;
  c.kv_heads = s.kv_heads;
  c.head_dim = head_dim;
  c.vocab = s.vocab;
  c.qk_norm = family->qk_norm;
  c.norm_placement = family->norms;
  if (s.family == "llama") {
    config.update({{"architectures", {"LlamaForCausalLM"}}, {"rms_norm_eps", 1e-5}, {"rope_theta", 10000.0},
                   {"hidden_act", "silu"}, {"tie_word_embeddings", false}});
    return std::pair{config, c};
  }
  if (family->moe && family->moe->gpt_oss_layout) {
    const size_t window = s.sliding_window ? s.sliding_window : 128;
    if (s.dtype == DType::mxfp4 && (s.hidden % 32 != 0 || expert_ffn % 32 != 0))
      return make_error(ErrorCode::invalid_argument, "synth: MXFP4 experts need --hidden and --expert-ffn multiples of 32");
    RopeSpec rope;
    rope.theta = 150000;
    rope.yarn = YarnRopeScaling{32, 4096, 32, 1, false, 0};
    nlohmann::json layer_types = nlohmann::json::array();
    for (size_t l = 0; l < s.layers; ++l) {
      const bool full = periodic_attention_kind(l, family->sliding_period) == AttentionKind::full;
      layer_types.push_back(full ? "full_attention" : "sliding_attention");
      c.layer_configs.push_back(LayerConfig{.attention = full ? AttentionKind::full : AttentionKind::sliding, .window = full ? 0 : window,
                                            .rope = rope, .head_dim = head_dim, .kv_heads = s.kv_heads, .sparse = true});
    }
    c.moe = {s.experts, s.experts_used, expert_ffn, RouterWeights::top_k_softmax};
    c.ffn = expert_ffn;
    c.attention_bias = c.attention_sinks = true;
    c.activation = Activation::swiglu_clamped;
    c.swiglu_limit = 7;
    config.update({{"architectures", {"GptOssForCausalLM"}}, {"num_local_experts", s.experts}, {"num_experts_per_tok", s.experts_used},
                   {"experts_per_token", s.experts_used}, {"intermediate_size", expert_ffn}, {"rms_norm_eps", 1e-5},
                   {"rope_theta", 150000.0}, {"sliding_window", window}, {"layer_types", layer_types}, {"attention_bias", true},
                   {"swiglu_limit", 7.0}, {"hidden_act", "silu"}, {"tie_word_embeddings", false}, {"initial_context_length", 4096},
                   {"rope_scaling", {{"rope_type", "yarn"}, {"factor", 32.0}, {"beta_fast", 32.0}, {"beta_slow", 1.0},
                                     {"original_max_position_embeddings", 4096}, {"truncate", false}}}});
    if (s.dtype == DType::mxfp4) {
      config["torch_dtype"] = "bfloat16";
      config["quantization_config"] = {{"quant_method", "mxfp4"},
                                       {"modules_to_not_convert", {"model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"}}};
    }
    return std::pair{config, c};
  }
  if (family->moe && !gemma4) {
    c.moe = {s.experts, s.experts_used, expert_ffn, RouterWeights::softmax_top_k_renormalised};
    c.set_uniform_layers(RopeSpec{});
    for (LayerConfig& l : c.layer_configs) l.sparse = true;
    for (size_t l : s.dense_layers) {
      if (l >= s.layers || (s.family != "qwen3moe" && s.family != "qwen2moe"))
        return make_error(ErrorCode::invalid_argument, "synth: --dense-layers are qwen3moe's and qwen2moe's, each below --layers");
      c.layer_configs[l].sparse = false;
    }
    config.update({{"num_experts_per_tok", s.experts_used}, {"hidden_act", "silu"}, {"tie_word_embeddings", false},
                   {"rope_theta", 1000000.0}});
    if (s.family == "mixtral") {
      config.update({{"architectures", {"MixtralForCausalLM"}}, {"num_local_experts", s.experts},
                     {"intermediate_size", expert_ffn}, {"rms_norm_eps", 1e-5}, {"sliding_window", nullptr}});
      c.ffn = expert_ffn;
    } else if (s.family == "qwen2moe") {
      // Qwen2-MoE: biases on q, k and v, top-k weights as they are, and the shared expert.
      c.attention_bias = true;
      c.moe.weights = RouterWeights::softmax_top_k;
      c.moe.shared_experts = 1;
      c.moe.shared_expert_ffn = s.shared_expert_ffn ? s.shared_expert_ffn : s.ffn;
      config.update({{"architectures", {"Qwen2MoeForCausalLM"}}, {"num_experts", s.experts}, {"moe_intermediate_size", expert_ffn},
                     {"shared_expert_intermediate_size", c.moe.shared_expert_ffn}, {"norm_topk_prob", false},
                     {"decoder_sparse_step", 1}, {"mlp_only_layers", s.dense_layers}, {"rms_norm_eps", 1e-6}});
    } else {
      config.update({{"architectures", {"Qwen3MoeForCausalLM"}}, {"num_experts", s.experts}, {"moe_intermediate_size", expert_ffn},
                     {"norm_topk_prob", true}, {"decoder_sparse_step", 1}, {"mlp_only_layers", s.dense_layers},
                     {"rms_norm_eps", 1e-6}, {"attention_bias", false}});
    }
    return std::pair{config, c};
  }
  const bool gemma2 = s.family == "gemma2";
  const size_t window = s.sliding_window ? s.sliding_window : gemma2 ? 4096 : 1024;
  const float attention_cap = s.attention_softcap.value_or(gemma2 ? 50.0f : 0.0f);
  const float final_cap = s.final_softcap.value_or(gemma2 || gemma4 ? 30.0f : 0.0f);
  // Gemma 4's full layers: twice the head size, a quarter of the KV heads, values = keys.
  const size_t full_head_dim = gemma4 ? (s.global_head_dim ? s.global_head_dim : 2 * head_dim) : head_dim;
  const size_t full_kv_heads = gemma4 ? (s.global_kv_heads ? s.global_kv_heads : std::max<size_t>(1, s.kv_heads / 4)) : s.kv_heads;
  if (s.heads % full_kv_heads != 0 || full_head_dim % 2 != 0)
    return make_error(ErrorCode::invalid_argument, "synth: heads must be a multiple of --global-kv-heads, and --global-head-dim even");
  nlohmann::json layer_types = nlohmann::json::array();
  const size_t period = s.sliding_period ? s.sliding_period : family->sliding_period;
  for (size_t l = 0; l < s.layers; ++l) {
    // Gemma 4 makes its last layer full whatever the period.
    const bool full = periodic_attention_kind(l, period) == AttentionKind::full || (gemma4 && l + 1 == s.layers);
    layer_types.push_back(full ? "full_attention" : "sliding_attention");
    c.layer_configs.push_back(LayerConfig{.attention = full ? AttentionKind::full : AttentionKind::sliding, .window = full ? 0 : window,
                                          .head_dim = full ? full_head_dim : head_dim, .kv_heads = full ? full_kv_heads : s.kv_heads,
                                          .values_are_keys = full && gemma4 && !s.separate_values});
  }
  c.layer_scalar = family->gemma4_attention;
  if (auto shared = share_kv_of_last_layers(c, s.kv_shared); !shared)
    return make_error(ErrorCode::invalid_argument, "synth: " + shared.error().message);
  if (s.double_wide) widen_kv_shared_ffn(c);
  c.ple_dim = s.ple_dim;
  c.ple_vocab = s.vocab;
  if (gemma4_moe) {
    c.moe = {s.experts, s.experts_used, expert_ffn, RouterWeights::softmax_top_k_renormalised, true};
    for (LayerConfig& l : c.layer_configs) l.sparse = true;
  }
  config.update({{"architectures", {gemma2 ? "Gemma2ForCausalLM" : gemma4 ? "Gemma4ForCausalLM" : "Gemma3ForCausalLM"}},
                 {"rms_norm_eps", 1e-6},
                 {"hidden_activation", "gelu_pytorch_tanh"},
                 {"sliding_window", window},
                 {"layer_types", layer_types},
                 {"attn_logit_softcapping", attention_cap > 0 ? nlohmann::json(attention_cap) : nlohmann::json()},
                 {"final_logit_softcapping", final_cap > 0 ? nlohmann::json(final_cap) : nlohmann::json()},
                 {"tie_word_embeddings", true},
                 {"bos_token_id", 2}});
  if (gemma4) {
    config.update({{"global_head_dim", full_head_dim}, {"num_global_key_value_heads", full_kv_heads}, {"attention_k_eq_v", !s.separate_values},
                   {"hidden_size_per_layer_input", s.ple_dim}, {"vocab_size_per_layer_input", s.vocab},
                   {"num_kv_shared_layers", s.kv_shared}, {"use_double_wide_mlp", s.double_wide}, {"enable_moe_block", gemma4_moe},
                   {"rope_parameters", {{"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 10000.0}}},
                                        {"full_attention", {{"rope_type", "proportional"}, {"partial_rotary_factor", 0.25},
                                                            {"rope_theta", 1000000.0}}}}}});
    if (gemma4_moe)
      config.update({{"num_experts", s.experts}, {"top_k_experts", s.experts_used}, {"moe_intermediate_size", expert_ffn}});
    return std::pair{config, c};
  }
  config["query_pre_attn_scalar"] = head_dim;
  if (gemma2) config["rope_theta"] = 10000.0;
  else
    config.update({{"rope_theta", 1000000.0}, {"rope_local_base_freq", 10000.0},
                   {"rope_scaling", {{"rope_type", "linear"}, {"factor", 8.0}}}});
  return std::pair{config, c};
}

}  // namespace

Status write_synthetic_checkpoint(const std::string& dir, const SynthSpec& s) {
  namespace fs = std::filesystem;
  const size_t head_dim = s.head_dim ? s.head_dim : s.hidden / s.heads;
  if ((!s.head_dim && s.hidden % s.heads != 0) || s.heads % s.kv_heads != 0 || head_dim % 2 != 0 || s.vocab < 256)
    return make_error(ErrorCode::invalid_argument,
                      "synth: the head size (--head-dim, or hidden / heads) must be a whole even number, heads a "
                      "multiple of kv-heads, and vocab at least 256");
  auto planned = synth_config(s);
  if (!planned) return planned.error();
  const auto& [config, c] = *planned;
  const bool gemma = c.norm_placement == NormPlacement::sandwich;
  const bool gemma4 = c.layer_scalar;  // its norms are stored as used, around 1
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return make_error(ErrorCode::invalid_argument, "cannot create " + dir + ": " + ec.message());
  std::ofstream(fs::path(dir) / "config.json") << config.dump(2) << "\n";
  std::ofstream(fs::path(dir) / "generation_config.json") << nlohmann::json{{"eos_token_id", config["eos_token_id"]}}.dump(2) << "\n";
  std::ofstream(fs::path(dir) / "tokenizer.json") << tokenizer_json(s.vocab, gemma4).dump() << "\n";

  // gpt-oss's MXFP4 experts: random values of fan_in quantised to GGML's blocks, written as
  // transformers' separate values and scale bytes (each tensor regenerates its values).
  enum class Fill { ones, around_zero, around_one, fan_in, mxfp4_values, mxfp4_scales };
  const DType dense_type = s.dtype == DType::mxfp4 ? DType::bf16 : s.dtype;
  struct Planned {
    TensorSpec spec;
    Fill fill;
    size_t fan_in;
    RoutingSteer steer = RoutingSteer::none;
  };
  std::vector<Planned> plan;
  for (const TensorEntry& e : kTensorEntries) {
    if (e.hf.empty()) continue;
    if (gemma && e.model_member == &Model::classifier) continue;  // tied
    for (size_t l = 0; l < (is_per_layer(e) ? c.layers : 1); ++l) {
      if (!tensor_applies(e, c, l)) continue;
      const auto shape = tensor_shape(e, c, l);
      // Norm weights are ones (Gemma 2/3: w − 1, random around 0; Gemma 4: random around
      // 1, as its layer scalars); the embedding is N(0, 1)-like (Gemma: N(0, 1/hidden), as
      // √hidden scales it back); matrices scale with their fan-in.
      // Biases and attention sinks are random around 0.
      const bool bias = e.layer_member == &LayerWeights::bq || e.layer_member == &LayerWeights::bk ||
                        e.layer_member == &LayerWeights::bv || e.layer_member == &LayerWeights::bo || e.layer_member == &LayerWeights::sinks;
      const Fill fill = shape.size() > 1 ? Fill::fan_in : bias || (gemma && !gemma4) ? Fill::around_zero : gemma4 ? Fill::around_one : Fill::ones;
      // (The per-layer embeddings' table as Gemma's: N(0, 1/ple_dim), × √ple_dim in use.)
      const size_t fan_in = e.model_member == &Model::embed ? (gemma ? s.hidden : 1)
                            : e.model_member == &Model::ple_embed ? s.ple_dim : shape.back();
      const RoutingSteer steer = e.model_member == &Model::embed ? RoutingSteer::embedding
                                 : e.layer_member == &LayerWeights::wo || e.layer_member == &LayerWeights::down ? RoutingSteer::residual_writer
                                                                                                                  : RoutingSteer::none;
      plan.push_back({{tensor_name(e, CheckpointFormat::hf, l), dense_type, shape}, fill, fan_in, steer});
    }
  }

  const Family* family = find_family(c.family);
  if (c.moe.experts) {
    // Stacked experts under transformers v5's names where it renamed the module (Mixtral).
    const MoeNames& names = s.stacked_experts && family->moe->v5 ? *family->moe->v5 : *family->moe;
    const size_t E = c.moe.experts, I = c.moe.expert_ffn, H = c.hidden;
    for (size_t l = 0; l < c.layers; ++l) {
      if (!c.layer(l).sparse) continue;
      plan.push_back({{hf_router_name(names, l), dense_type, {E, H}}, Fill::fan_in, H, RoutingSteer::router});
      if (names.gpt_oss_layout) {
        const std::string gate_up = hf_stacked_gate_up_name(names, l), down = hf_stacked_down_name(names, l);
        plan.push_back({{hf_router_bias_name(names, l), dense_type, {E}}, Fill::around_zero, 1});
        if (s.dtype == DType::mxfp4) {
          for (auto [name, rows, cols] : {std::tuple{gate_up, 2 * I, H}, {down, H, I}}) {
            plan.push_back({{name + "_blocks", DType::f32, {E, rows, cols / 32, 16}, true}, Fill::mxfp4_values, cols});
            plan.push_back({{name + "_scales", DType::f32, {E, rows, cols / 32}, true}, Fill::mxfp4_scales, cols});
          }
        } else {
          plan.push_back({{gate_up, dense_type, {E, H, 2 * I}}, Fill::fan_in, H});
          plan.push_back({{down, dense_type, {E, I, H}}, Fill::fan_in, I});
        }
        plan.push_back({{gate_up + "_bias", dense_type, {E, 2 * I}}, Fill::around_zero, 1});
        plan.push_back({{down + "_bias", dense_type, {E, H}}, Fill::around_zero, 1});
        continue;
      }
      if (s.stacked_experts || c.moe.beside_dense) {  // Gemma 4's experts are always stacked
        plan.push_back({{hf_stacked_gate_up_name(names, l), s.dtype, {E, 2 * I, H}}, Fill::fan_in, H});
        plan.push_back({{hf_stacked_down_name(names, l), s.dtype, {E, H, I}}, Fill::fan_in, I, RoutingSteer::residual_writer});
        continue;
      }
      for (size_t e = 0; e < E; ++e)
        for (ExpertRole role : {ExpertRole::gate, ExpertRole::up, ExpertRole::down}) {
          const bool down = role == ExpertRole::down;
          plan.push_back({{hf_expert_name(names, l, e, role), s.dtype, down ? std::vector<size_t>{H, I} : std::vector<size_t>{I, H}},
                          Fill::fan_in, down ? I : H, down ? RoutingSteer::residual_writer : RoutingSteer::none});
        }
    }
    // Qwen2-MoE's shared expert (its gate is a row of the tensor table).
    for (size_t l = 0; l < c.layers && c.moe.shared_experts; ++l) {
      if (!c.layer(l).sparse) continue;
      const size_t S = c.moe.shared_expert_ffn, H = c.hidden;
      for (ExpertRole role : {ExpertRole::gate, ExpertRole::up, ExpertRole::down}) {
        const bool down = role == ExpertRole::down;
        plan.push_back({{hf_shared_expert_name(*family->moe, l, role), s.dtype, down ? std::vector<size_t>{H, S} : std::vector<size_t>{S, H}},
                        Fill::fan_in, down ? S : H});
      }
    }
  }

  std::vector<TensorSpec> specs;
  for (const auto& p : plan) specs.push_back(p.spec);
  return write_safetensors((fs::path(dir) / "model.safetensors").string(), specs, [&](size_t i) {
    const auto& p = plan[i];
    if (p.fill == Fill::mxfp4_values || p.fill == Fill::mxfp4_scales) {
      const bool scales = p.fill == Fill::mxfp4_scales;
      const std::string values_name = p.spec.name.substr(0, p.spec.name.size() - 7);  // less "_scales" or "_blocks"
      const size_t blocks_count = p.spec.bytes() / (scales ? 1 : 16);
      const auto values = random_values(blocks_count * 32, p.fan_in, s.seed ^ name_hash(values_name));
      std::vector<uint8_t> out(p.spec.bytes()), ggml(17);
      for (size_t b = 0; b < blocks_count; ++b) {
        blocks::quantize_block(DType::mxfp4, &values[b * 32], ggml.data());
        uint8_t hf_values[16], scale;
        mxfp4_block_to_hf(ggml.data(), hf_values, &scale);
        if (scales) out[b] = scale;
        else std::memcpy(&out[b * 16], hf_values, 16);
      }
      return out;
    }
    const size_t count = p.spec.bytes() / dtype_bytes(p.spec.dtype, 1);
    const uint64_t seed = s.seed ^ name_hash(p.spec.name);
    std::vector<float> values = p.fill == Fill::ones ? std::vector<float>(count, 1.0f)
                                : p.fill == Fill::fan_in ? random_values(count, p.fan_in, seed)
                                                         : random_values(count, 12, seed);  // ±0.5
    if (p.fill == Fill::around_one)
      for (float& v : values) v += 1.0f;
    if (p.spec.name.ends_with("mlp.down_proj.weight")) {  // row h of [hidden, ffn] makes output coordinate h
      const size_t width = p.spec.shape.back();  // the layer's FFN width
      for (const auto& [h, factor] : massive_coordinates(s))
        for (size_t j = 0; j < width; ++j) values[h * width + j] *= factor;
    }
    if (s.reachable_experts) steer_routing(p.steer, p.spec.shape, s.reachable_experts, values);
    return encode_tensor(p.spec.dtype, values);
  });
}

}  // namespace larql
