// Model families larql runs, as data: what differs between them in the forward pass, and
// their name in each checkpoint format. Hugging Face's model_type is `name`; GGUF's
// general.architecture is `gguf_arch` (llama.cpp writes Mistral as "llama").
#pragma once

#include <cstddef>
#include <iterator>
#include <string>
#include <string_view>

#include "kernels/ops.h"
#include "model/model.h"

namespace larql {

// A mixture-of-experts family: its Hugging Face names under model.layers.{L}. (the router
// "<hf_router>", expert E's projections "<hf_experts>E.<proj>.weight", or, transformers v5,
// stacked "<hf_experts>gate_up_proj" and "<hf_experts>down_proj"), its config keys, and
// where its experts sit.
struct MoeNames {
  std::string_view hf_router, hf_experts;
  std::string_view hf_gate, hf_up, hf_down;
  std::string_view experts_key, top_k_key, width_key;  // config.json; width_key empty: intermediate_size
  RouterWeights weights;  // unless the config says otherwise (Qwen3-MoE's norm_topk_prob)
  // Gemma 4 (26B-A4B): the experts beside a dense MLP, each with its norms; the router reads
  // the residual through a norm without weight, × router.scale × hidden^-½, and each chosen
  // weight is × per_expert_scale. Such a family's models may be dense (enable_moe_block).
  bool beside_dense = false;
  // GPT-OSS: experts with biases, stored as transformers keeps them (gate_up_proj
  // [E][H][2·I] with gate and up interleaved, down_proj [E][I][H], or MXFP4 *_blocks and
  // *_scales [E][rows][...]), converted at load (gpt_oss_experts.h); the router's bias.
  bool gpt_oss_layout = false;
  std::string_view hf_router_bias = {};
  // Where transformers v5 renamed the module (Mixtral's block_sparse_moe became mlp): the
  // names it saves, tried when a layer's router is not under these ones.
  const MoeNames* v5 = nullptr;
  // llama.cpp's rule for this family's GGUF files (it has no key for it: qwen3moe renormalises
  // whatever transformers' norm_topk_prob says, qwen2moe never does).
  RouterWeights gguf_weights = RouterWeights::softmax_top_k_renormalised;
  // Qwen2-MoE: a shared expert "<hf_shared_expert>{gate,up,down}_proj.weight" of width
  // `shared_width_key` that every position uses, weighted by sigmoid(mlp.shared_expert_gate · x).
  std::string_view hf_shared_expert = {};
  std::string_view shared_width_key = {};
  // llama.cpp's experts' width for this family's GGUF files without
  // expert_feed_forward_length: feed_forward_length / expert_used_count (qwen3moe,
  // qwen2moe), else feed_forward_length.
  bool gguf_width_per_expert_used = false;
};
inline constexpr MoeNames kMixtralV5Moe{"mlp.gate.weight", "mlp.experts.", "w1", "w3", "w2",
                                        "num_local_experts", "num_experts_per_tok", "", RouterWeights::softmax_top_k_renormalised};
inline constexpr MoeNames kMixtralMoe{"block_sparse_moe.gate.weight", "block_sparse_moe.experts.", "w1", "w3", "w2",
                                      "num_local_experts", "num_experts_per_tok", "", RouterWeights::softmax_top_k_renormalised,
                                      false, false, {}, &kMixtralV5Moe};
inline constexpr MoeNames kQwenMoe{"mlp.gate.weight", "mlp.experts.", "gate_proj", "up_proj", "down_proj",
                                   "num_experts", "num_experts_per_tok", "moe_intermediate_size", RouterWeights::softmax_top_k,
                                   false, false, {}, nullptr, RouterWeights::softmax_top_k_renormalised, {}, {}, true};
inline constexpr MoeNames kGemma4Moe{"router.proj.weight", "experts.", "gate_proj", "up_proj", "down_proj",
                                     "num_experts", "top_k_experts", "moe_intermediate_size",
                                     RouterWeights::softmax_top_k_renormalised, true};

inline constexpr MoeNames kQwen2Moe{"mlp.gate.weight", "mlp.experts.", "gate_proj", "up_proj", "down_proj",
                                    "num_experts", "num_experts_per_tok", "moe_intermediate_size", RouterWeights::softmax_top_k,
                                    false, false, {}, nullptr, RouterWeights::softmax_top_k, "mlp.shared_expert.",
                                    "shared_expert_intermediate_size", true};

inline constexpr MoeNames kGptOssMoe{"mlp.router.weight", "mlp.experts.", "", "", "",
                                     "num_local_experts", "num_experts_per_tok", "", RouterWeights::top_k_softmax,
                                     false, true, "mlp.router.bias", nullptr, RouterWeights::top_k_softmax};

struct Family {
  std::string_view name;
  std::string_view gguf_arch;
  bool attention_bias;  // biases on q, k, v
  bool qk_norm;         // RMSNorm on each head of q and k
  // llama.cpp's converter permutes this family's q/k rows for adjacent-pair RoPE
  bool gguf_permutes_qk;
  NormPlacement norms;
  Activation activation;        // when the config does not name one
  float hf_norm_weight_offset;  // HF files store norm weights minus this (GGUF files do not)
  bool scaled_embedding;        // embeddings × √hidden
  // Sliding-window layers: every layer but the last of each period of this many (0: none).
  size_t sliding_period;
  // Gemma 4: attention scores unscaled (1.0), RMSNorm without weight on v, a scalar per
  // layer on its output; its GGUF files list the sliding layers as a bool array.
  bool gemma4_attention = false;
  const MoeNames* moe = nullptr;  // mixture-of-experts families
  // GPT-OSS: attention sinks and a bias on attention's output (ModelConfig::attention_sinks).
  bool attention_sinks = false;
  // The GGUF name of the norm before the FFN where it is not "ffn_norm" (GPT-OSS: its
  // converter keeps HF's post_attention name, "post_attention_norm").
  std::string_view gguf_ffn_norm = "ffn_norm";
};

inline constexpr Family kFamilies[] = {
    {"llama", "llama", false, false, true, NormPlacement::pre, Activation::silu, 0, false, 0},
    {"mistral", "llama", false, false, true, NormPlacement::pre, Activation::silu, 0, false, 0},
    {"qwen2", "qwen2", true, false, false, NormPlacement::pre, Activation::silu, 0, false, 0},
    {"qwen3", "qwen3", false, true, false, NormPlacement::pre, Activation::silu, 0, false, 0},
    {"gemma2", "gemma2", false, false, false, NormPlacement::sandwich, Activation::gelu_tanh, 1, true, 2},
    {"gemma3_text", "gemma3", false, true, false, NormPlacement::sandwich, Activation::gelu_tanh, 1, true, 6},
    {"gemma4_text", "gemma4", false, true, false, NormPlacement::sandwich, Activation::gelu_tanh, 0, true, 6, true, &kGemma4Moe},
    // GGUF writes Mixtral as arch "llama" with expert_count (gguf_model_config picks this row then).
    {"mixtral", "llama", false, false, true, NormPlacement::pre, Activation::silu, 0, false, 0, false, &kMixtralMoe},
    {"qwen3_moe", "qwen3moe", false, true, false, NormPlacement::pre, Activation::silu, 0, false, 0, false, &kQwenMoe},
    {"qwen2_moe", "qwen2moe", true, false, false, NormPlacement::pre, Activation::silu, 0, false, 0, false, &kQwen2Moe},
    {"gpt_oss", "gpt-oss", true, false, false, NormPlacement::pre, Activation::swiglu_clamped, 0, false, 2, false, &kGptOssMoe, true,
     "post_attention_norm"},
};

inline const Family* find_family(std::string_view name) {
  for (const auto& f : kFamilies)
    if (f.name == name) return &f;
  return nullptr;
}

inline const Family* find_gguf_family(std::string_view arch) {
  for (const auto& f : kFamilies)
    if (f.gguf_arch == arch) return &f;
  return nullptr;
}

// "llama, mistral, ..." for error messages.
inline std::string family_names(bool gguf) {
  std::string out;
  for (size_t i = 0; i < std::size(kFamilies); ++i) {
    auto name = [&](size_t k) { return gguf ? kFamilies[k].gguf_arch : kFamilies[k].name; };
    bool repeated = false;
    for (size_t k = 0; k < i; ++k) repeated |= name(k) == name(i);
    if (!repeated) out += (out.empty() ? "" : ", ") + std::string(name(i));
  }
  return out;
}

// Gemma's layer pattern: layer i is full when (i + 1) is a multiple of the period.
inline AttentionKind periodic_attention_kind(size_t layer, size_t period) {
  return period == 0 || (layer + 1) % period == 0 ? AttentionKind::full : AttentionKind::sliding;
}

}  // namespace larql
