// Every tensor of a model, once: its role (where it goes in Model / LayerWeights), its
// name in each checkpoint format, its shape from the config, and when it is present.
// The loaders, `larql synth`, the GGUF writer and the test fixtures all use this table.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/model.h"

namespace larql {

enum class CheckpointFormat { hf, gguf };

// Per-layer shapes follow that layer's LayerConfig (head size, KV heads).
// ple_*: per-layer embeddings' (ple_dim values per layer; all_ple: every layer's, layers · ple_dim).
enum class TensorShape { vocab_by_hidden, hidden, q_by_hidden, kv_by_hidden, hidden_by_q, q, kv, head_dim, half_max_head_dim,
                         ffn_by_hidden, hidden_by_ffn, one, experts, heads, ple_vocab_by_all_ple, all_ple_by_hidden, ple,
                         ple_by_hidden, hidden_by_ple, shared_experts_by_hidden };

enum class TensorPresence {
  required,
  if_attention_bias,
  if_qk_norm,
  if_pre_norms,       // NormPlacement::pre only
  if_sandwich_norms,  // NormPlacement::sandwich only
  if_own_values,      // layers whose values are not their keys (no v_proj on Gemma 4's K=V layers)
  if_layer_scalar,    // Gemma 4
  if_dense_ffn,       // layers with a dense FFN (not a mixture of experts' sparse layer, but Gemma 4's)
  if_experts_beside_dense,  // Gemma 4's sparse layers: the experts' norms and scales
  if_shared_experts,  // Qwen2-MoE's sparse layers: the shared expert's gate
  if_attention_sinks, // GPT-OSS
  if_per_layer_embeddings,  // Gemma 4's E models
  optional,  // the classifier (absent: tied to the embedding), rope_freqs
};

struct TensorEntry {
  std::string_view hf;    // per-layer names follow "model.layers.{L}."
  std::string_view gguf;  // per-layer names follow "blk.{L}."; empty: not in this format
  Matrix Model::*model_member;          // set for model-wide tensors
  Matrix LayerWeights::*layer_member;   // set for per-layer tensors
  TensorShape shape;
  TensorPresence presence;
};

inline constexpr TensorEntry kTensorEntries[] = {
    {"model.embed_tokens.weight", "token_embd.weight", &Model::embed, nullptr, TensorShape::vocab_by_hidden, TensorPresence::required},
    {"model.norm.weight", "output_norm.weight", &Model::final_norm, nullptr, TensorShape::hidden, TensorPresence::required},
    {"lm_head.weight", "output.weight", &Model::classifier, nullptr, TensorShape::vocab_by_hidden, TensorPresence::optional},
    {"", "rope_freqs.weight", &Model::rope_freqs, nullptr, TensorShape::half_max_head_dim, TensorPresence::optional},
    {"input_layernorm.weight", "attn_norm.weight", nullptr, &LayerWeights::attn_norm, TensorShape::hidden, TensorPresence::required},
    {"self_attn.q_proj.weight", "attn_q.weight", nullptr, &LayerWeights::wq, TensorShape::q_by_hidden, TensorPresence::required},
    {"self_attn.k_proj.weight", "attn_k.weight", nullptr, &LayerWeights::wk, TensorShape::kv_by_hidden, TensorPresence::required},
    {"self_attn.v_proj.weight", "attn_v.weight", nullptr, &LayerWeights::wv, TensorShape::kv_by_hidden, TensorPresence::if_own_values},
    {"self_attn.o_proj.weight", "attn_output.weight", nullptr, &LayerWeights::wo, TensorShape::hidden_by_q, TensorPresence::required},
    {"self_attn.q_proj.bias", "attn_q.bias", nullptr, &LayerWeights::bq, TensorShape::q, TensorPresence::if_attention_bias},
    {"self_attn.k_proj.bias", "attn_k.bias", nullptr, &LayerWeights::bk, TensorShape::kv, TensorPresence::if_attention_bias},
    {"self_attn.v_proj.bias", "attn_v.bias", nullptr, &LayerWeights::bv, TensorShape::kv, TensorPresence::if_attention_bias},
    {"self_attn.o_proj.bias", "attn_output.bias", nullptr, &LayerWeights::bo, TensorShape::hidden, TensorPresence::if_attention_sinks},
    {"self_attn.sinks", "attn_sinks.weight", nullptr, &LayerWeights::sinks, TensorShape::heads, TensorPresence::if_attention_sinks},
    {"self_attn.q_norm.weight", "attn_q_norm.weight", nullptr, &LayerWeights::q_norm, TensorShape::head_dim, TensorPresence::if_qk_norm},
    {"self_attn.k_norm.weight", "attn_k_norm.weight", nullptr, &LayerWeights::k_norm, TensorShape::head_dim, TensorPresence::if_qk_norm},
    // HF's `post_attention_layernorm` is a different norm in each placement: on attention's
    // output in Gemma's sandwich, before the FFN in Llama's. Two rows, one per placement.
    {"post_attention_layernorm.weight", "post_attention_norm.weight", nullptr, &LayerWeights::attn_out_norm, TensorShape::hidden, TensorPresence::if_sandwich_norms},
    {"post_attention_layernorm.weight", "ffn_norm.weight", nullptr, &LayerWeights::ffn_norm, TensorShape::hidden, TensorPresence::if_pre_norms},
    {"pre_feedforward_layernorm.weight", "ffn_norm.weight", nullptr, &LayerWeights::ffn_norm, TensorShape::hidden, TensorPresence::if_sandwich_norms},
    {"mlp.gate_proj.weight", "ffn_gate.weight", nullptr, &LayerWeights::gate, TensorShape::ffn_by_hidden, TensorPresence::if_dense_ffn},
    {"mlp.up_proj.weight", "ffn_up.weight", nullptr, &LayerWeights::up, TensorShape::ffn_by_hidden, TensorPresence::if_dense_ffn},
    {"mlp.down_proj.weight", "ffn_down.weight", nullptr, &LayerWeights::down, TensorShape::hidden_by_ffn, TensorPresence::if_dense_ffn},
    {"post_feedforward_layernorm.weight", "post_ffw_norm.weight", nullptr, &LayerWeights::ffn_out_norm, TensorShape::hidden, TensorPresence::if_sandwich_norms},
    // Gemma 4's experts beside the dense FFN: their input norm, the two output norms whose sum
    // post_feedforward_layernorm then takes, the router's scale and each expert's.
    {"pre_feedforward_layernorm_2.weight", "pre_ffw_norm_2.weight", nullptr, &LayerWeights::expert_norm, TensorShape::hidden, TensorPresence::if_experts_beside_dense},
    {"post_feedforward_layernorm_1.weight", "post_ffw_norm_1.weight", nullptr, &LayerWeights::dense_out_norm, TensorShape::hidden, TensorPresence::if_experts_beside_dense},
    {"post_feedforward_layernorm_2.weight", "post_ffw_norm_2.weight", nullptr, &LayerWeights::expert_out_norm, TensorShape::hidden, TensorPresence::if_experts_beside_dense},
    {"router.scale", "ffn_gate_inp.scale", nullptr, &LayerWeights::router_scale, TensorShape::hidden, TensorPresence::if_experts_beside_dense},
    {"router.per_expert_scale", "ffn_down_exps.scale", nullptr, &LayerWeights::expert_scale, TensorShape::experts, TensorPresence::if_experts_beside_dense},
    {"mlp.shared_expert_gate.weight", "ffn_gate_inp_shexp.weight", nullptr, &LayerWeights::shared_expert_gate, TensorShape::shared_experts_by_hidden, TensorPresence::if_shared_experts},
    {"layer_scalar", "layer_output_scale.weight", nullptr, &LayerWeights::output_scale, TensorShape::one, TensorPresence::if_layer_scalar},
    // Gemma 4's E models: per-layer embeddings (the table, the embedding's projection and its
    // norm), and in each layer the gate, the projection back and its norm.
    {"model.embed_tokens_per_layer.weight", "per_layer_token_embd.weight", &Model::ple_embed, nullptr, TensorShape::ple_vocab_by_all_ple, TensorPresence::if_per_layer_embeddings},
    {"model.per_layer_model_projection.weight", "per_layer_model_proj.weight", &Model::ple_model_proj, nullptr, TensorShape::all_ple_by_hidden, TensorPresence::if_per_layer_embeddings},
    {"model.per_layer_projection_norm.weight", "per_layer_proj_norm.weight", &Model::ple_proj_norm, nullptr, TensorShape::ple, TensorPresence::if_per_layer_embeddings},
    {"per_layer_input_gate.weight", "inp_gate.weight", nullptr, &LayerWeights::ple_gate, TensorShape::ple_by_hidden, TensorPresence::if_per_layer_embeddings},
    {"per_layer_projection.weight", "proj.weight", nullptr, &LayerWeights::ple_proj, TensorShape::hidden_by_ple, TensorPresence::if_per_layer_embeddings},
    {"post_per_layer_input_norm.weight", "post_norm.weight", nullptr, &LayerWeights::ple_post_norm, TensorShape::hidden, TensorPresence::if_per_layer_embeddings},
};

inline bool is_per_layer(const TensorEntry& e) { return e.layer_member != nullptr; }
// RMSNorm weights: the ones HF Gemma 2/3 files store as w − 1.
inline bool is_norm_weight(const TensorEntry& e) {
  return e.model_member == &Model::final_norm || e.layer_member == &LayerWeights::attn_norm ||
         e.layer_member == &LayerWeights::q_norm || e.layer_member == &LayerWeights::k_norm ||
         e.layer_member == &LayerWeights::attn_out_norm || e.layer_member == &LayerWeights::ffn_norm ||
         e.layer_member == &LayerWeights::ffn_out_norm || e.layer_member == &LayerWeights::expert_norm ||
         e.layer_member == &LayerWeights::dense_out_norm || e.layer_member == &LayerWeights::expert_out_norm ||
         e.model_member == &Model::ple_proj_norm || e.layer_member == &LayerWeights::ple_post_norm;
}
// Keys' and values' tensors: a KV-shared layer has none (a file's are ignored there).
inline bool is_kv_weight(const TensorEntry& e) {
  return e.layer_member == &LayerWeights::wk || e.layer_member == &LayerWeights::wv || e.layer_member == &LayerWeights::bk ||
         e.layer_member == &LayerWeights::bv || e.layer_member == &LayerWeights::k_norm;
}
inline bool is_ffn_weight(const TensorEntry& e) {
  return e.layer_member == &LayerWeights::gate || e.layer_member == &LayerWeights::up || e.layer_member == &LayerWeights::down;
}

// "[2, 3]": a shape as error messages print it.
std::string shape_string(const std::vector<size_t>& shape);

// The entry's name in `format` (layer ignored for model-wide tensors); empty when the
// format has no such tensor.
std::string tensor_name(const TensorEntry& e, CheckpointFormat format, size_t layer = 0);

// Row-major shape: {rows, cols} for a matrix, {n} for a vector; per-layer tensors at `layer`.
std::vector<size_t> tensor_shape(const TensorEntry& e, const ModelConfig& c, size_t layer = 0);

// Whether a model with config `c` has this tensor (at `layer`) at all; optional ones may
// still be absent.
bool tensor_applies(const TensorEntry& e, const ModelConfig& c, size_t layer = 0);

// Calls fn for every tensor m holds, in table order (a tied classifier is skipped), each
// once, under the table row that applies to m's configuration.
void for_each_tensor(const Model& m, const std::function<void(const TensorEntry&, size_t layer, const Matrix&)>& fn);

// A tensor as a reader found it in a file.
struct FoundTensor {
  std::optional<DType> dtype;  // nullopt: a format larql does not compute on, named by format_name
  std::string format_name;
  std::vector<size_t> shape;  // row-major
  const void* data;
  std::string file;           // for error messages
};

// A found tensor of `shape` in a format larql computes on, or an error naming it.
Status check_found_tensor(const FoundTensor& found, const std::string& name, const std::vector<size_t>& shape);

// Builds m's weights (m.config set, m.files kept alive by the caller) from whatever
// `find(name)` returns, checking presence, shape and format against the config. Errors name the
// source, the tensor and what was expected.
Status assemble_model(Model& m, CheckpointFormat format, const std::string& source,
                      const std::function<std::optional<FoundTensor>(const std::string& name)>& find);

}  // namespace larql
