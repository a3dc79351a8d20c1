// A loaded model: its configuration (families are data, not forks of the forward pass)
// and views of its weights, in place in the memory-mapped files.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/dtype.h"
#include "kernels/ops.h"
#include "model/mapped_file.h"

namespace larql {

class HugePageRegion;  // model/huge_pages.h

enum class RopeLayout {
  adjacent_pairs,  // llama2.c: rotate (x[2i], x[2i+1])
  half_split,      // Hugging Face: rotate (x[i], x[i + head_dim/2])
};

// Llama 3.x "rope_scaling": {"rope_type": "llama3", ...}.
struct Llama3RopeScaling {
  float factor = 8;
  float low_freq_factor = 1;
  float high_freq_factor = 4;
  float original_max_position = 8192;
};

// Where a block's RMSNorms sit. Llama's HF name `post_attention_layernorm` is the norm
// before the FFN; Gemma's is the norm on attention's output: LayerWeights names roles, not
// file names, and the tensor table maps each family's names onto them.
enum class NormPlacement {
  pre,       // Llama, Qwen:  x += attn(norm(x));        x += ffn(norm(x))
  sandwich,  // Gemma 2/3/4:  x += norm(attn(norm(x)));  x += norm(ffn(norm(x)))
};

enum class AttentionKind {
  full,     // every earlier position
  sliding,  // the last `window` positions, the query's own included
};

// YaRN (rope_type "yarn", GPT-OSS): frequencies between the original and the interpolated
// ones by a linear ramp over the pair index, and cos/sin × attention_factor (transformers'
// _compute_yarn_parameters; `truncate` floors and ceils the ramp's ends, as llama.cpp does).
struct YarnRopeScaling {
  float factor = 32;
  float original_max_position = 4096;
  float beta_fast = 32, beta_slow = 1;
  bool truncate = true;
  float attention_factor = 0;  // 0: 0.1 · ln(factor) + 1
};

struct RopeSpec {
  float theta = 10000.0f;
  float linear_factor = 1.0f;  // rope_type "linear": positions divided by it
  std::optional<Llama3RopeScaling> llama3;
  std::optional<YarnRopeScaling> yarn;
  // rope_type "proportional" (Gemma 4's full layers): only the first `rotated_pairs` pairs
  // turn, with frequencies of the full head size; the rest stay put. 0: every pair turns.
  size_t rotated_pairs = 0;
  bool freq_factors = true;  // divided by the model's rope_freqs tensor, where it has one
};

// How a mixture-of-experts router turns its logits into the chosen experts' weights
// (../shared/reference/moe-architecture.md). Ties in top-k go to the lower expert id.
enum class RouterWeights {
  softmax_top_k_renormalised,  // softmax over all experts, top-k, divided by their sum (Mixtral, Qwen3-MoE)
  softmax_top_k,               // softmax over all experts, top-k as they are (Qwen3-MoE without norm_topk_prob, Qwen2-MoE)
  top_k_softmax,               // top-k of the logits, softmax over those k (GPT-OSS)
};

// A model's mixture-of-experts layers: how many experts each has and uses, their width.
// Layers whose LayerConfig::experts is 0 are dense (Qwen3-MoE's mlp_only_layers).
struct MoeSpec {
  size_t experts = 0;       // per MoE layer; 0: the model has none
  size_t experts_used = 0;  // top-k
  size_t expert_ffn = 0;    // each expert's inner width
  RouterWeights weights = RouterWeights::softmax_top_k_renormalised;
  // Gemma 4: sparse layers keep their dense FFN too; the experts read the residual through
  // their own norm (LayerWeights::expert_norm), the router through a norm without weight ×
  // router_scale × hidden^-½, and each weight is × expert_scale[e] (families.h's MoeNames).
  bool beside_dense = false;
  // Qwen2-MoE: experts every position uses, ids experts … experts + shared_experts − 1 (PROTOCOL
  // §12), each weighted by the sigmoid of its row of LayerWeights::shared_expert_gate · x.
  size_t shared_experts = 0;
  size_t shared_expert_ffn = 0;  // their inner width
  // Expert ids of a sparse layer: the routed ones, then the shared ones.
  size_t expert_ids() const { return experts + shared_experts; }
};

// What may differ from one layer to the next: Gemma interleaves sliding and full layers,
// each with its own RoPE; Gemma 4's full layers also have larger heads, fewer KV heads and
// values that are their keys.
struct LayerConfig {
  AttentionKind attention = AttentionKind::full;
  size_t window = 0;  // sliding layers only
  RopeSpec rope = {};
  size_t head_dim = 0;             // set by every loader (most families: the model's)
  size_t kv_heads = 0;
  bool values_are_keys = false;    // Gemma 4 "attention_k_eq_v": no v_proj, V = k_proj(x) before k_norm
  bool sparse = false;             // a mixture-of-experts layer (ModelConfig::moe), not a dense FFN
  size_t ffn = 0;                  // the dense FFN's width; 0: the model's (Gemma 4 E2B doubles it on KV-shared layers)
  // Gemma 4's E models: a KV-shared layer computes only its queries and attends over the keys
  // and values this earlier layer cached; it has no k/v projections and no cache of its own.
  std::optional<size_t> kv_from = std::nullopt;
};

struct ModelConfig {
  std::string name;                // file or directory name, for logs and /v1/stats
  std::string family = "llama";    // config.json model_type; "llama" for llama2.c files
  size_t hidden = 0;               // model dimension
  size_t ffn = 0;                  // FFN inner dimension
  size_t layers = 0;
  size_t heads = 0;
  size_t kv_heads = 0;
  size_t head_dim = 0;
  size_t vocab = 0;
  size_t context = 0;              // maximum positions
  float norm_eps = 1e-5f;
  // RMSNorm multiplies by (norm_weight_offset + w): HF Gemma 2/3 files store w − 1.
  float norm_weight_offset = 0.0f;
  NormPlacement norm_placement = NormPlacement::pre;
  RopeLayout rope_layout = RopeLayout::adjacent_pairs;
  std::vector<LayerConfig> layer_configs;  // one per layer
  Activation activation = Activation::silu;
  float embedding_scale = 1.0f;    // Gemma: √hidden (HF rounds it to the embedding's dtype)
  float attention_scale = 0.0f;    // scores = q·k × this; 0: 1/√head_dim
  float attention_softcap = 0.0f;  // Gemma 2: scores = cap·tanh(scores / cap) before the mask; 0: none
  float final_softcap = 0.0f;      // Gemma 2: logits = cap·tanh(logits / cap); 0: none
  bool value_norm = false;         // Gemma 4: RMSNorm without weight on each head of v
  bool layer_scalar = false;       // Gemma 4: each layer's output × its layer_scalar
  bool qk_norm = false;            // Qwen3: RMSNorm on each head of q and k
  bool attention_bias = false;     // Qwen2: biases on q, k, v
  // GPT-OSS: a learned logit per query head as one more softmax column (then dropped), and
  // a bias on attention's output projection.
  bool attention_sinks = false;
  float swiglu_limit = 0;          // Activation::swiglu_clamped's clamp (GPT-OSS: 7)
  MoeSpec moe;                     // mixture of experts (Mixtral, Qwen3-MoE); experts 0: dense
  // Gemma 4's E models' per-layer embeddings (gemma-architecture.md §6): each layer adds a
  // gated input of ple_dim values, made from a token table [ple_vocab][layers · ple_dim]
  // (× ple_scale) and a projection of the scaled embedding. 0: none.
  size_t ple_dim = 0;
  size_t ple_vocab = 0;            // the table's rows; larger token ids read row 0 (Gemma 3n's rule)
  float ple_scale = 1.0f;          // √ple_dim (HF rounds it to the table's dtype)
  int bos_id = -1;                 // -1: none
  std::vector<int> eos_ids;        // generation stops at any of these

  size_t q_dim() const { return heads * head_dim; }
  float score_scale() const { return attention_scale > 0 ? attention_scale : 1.0f / std::sqrt(float(head_dim)); }
  // Every layer full attention with the same RoPE (Llama, Qwen).
  void set_uniform_layers(const RopeSpec& rope) {
    layer_configs.assign(layers, LayerConfig{.rope = rope, .head_dim = head_dim, .kv_heads = kv_heads});
  }
  const LayerConfig& layer(size_t l) const { return layer_configs.at(l); }
  size_t q_dim(size_t l) const { return heads * layer(l).head_dim; }
  size_t kv_dim(size_t l) const { return layer(l).kv_heads * layer(l).head_dim; }
  size_t max_head_dim() const {
    size_t m = head_dim;
    for (const LayerConfig& l : layer_configs) m = std::max(m, l.head_dim);
    return m;
  }
  size_t kv_dim() const { return kv_heads * head_dim; }
  size_t ffn_width(size_t l) const { return layer(l).ffn ? layer(l).ffn : ffn; }
  // The layer whose KV cache layer l reads: its own unless it is KV-shared.
  size_t kv_layer(size_t l) const { return layer(l).kv_from.value_or(l); }
  bool owns_kv(size_t l) const { return !layer(l).kv_from; }
  // Bytes a sequence's KV cache holds per position: keys and values (f32) of the layers
  // that own one.
  size_t kv_bytes_per_position() const {
    size_t bytes = 0;
    for (size_t l = 0; l < layer_configs.size(); ++l)
      if (owns_kv(l)) bytes += 2 * kv_dim(l) * sizeof(float);
    return bytes;
  }
};

// One expert of a mixture-of-experts layer: a gated FFN of width MoeSpec::expert_ffn, views
// into the checkpoint's per-expert or stacked tensors.
struct ExpertWeights {
  Matrix gate, up, down;  // gate/up: [expert_ffn][hidden], down: [hidden][expert_ffn]
  Matrix gate_bias, up_bias, down_bias;  // GPT-OSS: added to each product; empty elsewhere
};

struct LayerWeights {
  Matrix attn_norm;          // before attention
  Matrix wq, wk, wv, wo;
  Matrix bq, bk, bv;         // empty unless attention_bias
  Matrix bo;                 // attention_sinks: the output projection's bias
  Matrix sinks;              // attention_sinks: [heads], each head's sink logit
  Matrix q_norm, k_norm;     // empty unless qk_norm
  Matrix attn_out_norm;      // sandwich: on attention's output, before the residual add
  Matrix ffn_norm;           // before the FFN (the client applies it, never the shard)
  Matrix gate, up, down;     // gate/up: [ffn][hidden], down: [hidden][ffn]
  Matrix ffn_out_norm;       // sandwich: on the FFN's output (client side too)
  Matrix output_scale;       // Gemma 4 layer_scalar: one value multiplying the layer's output
  Matrix router;             // sparse layers: [experts][hidden], the router's logits
  Matrix router_bias;        // GPT-OSS: [experts], added to those logits
  Matrix router_scale;       // beside_dense: [hidden], on the router's normed input
  Matrix expert_scale;       // beside_dense: [experts], on each chosen weight
  Matrix expert_norm;        // beside_dense: the experts' input norm (pre_feedforward_layernorm_2)
  Matrix dense_out_norm;     // beside_dense: on the dense FFN's output (post_feedforward_layernorm_1)
  Matrix expert_out_norm;    // beside_dense: on the experts' sum (post_feedforward_layernorm_2)
  Matrix shared_expert_gate; // shared experts: [shared][hidden], each one's weight is sigmoid(row · x)
  Matrix ple_gate;           // per-layer embeddings: [ple_dim][hidden], gates the layer's input
  Matrix ple_proj;           // [hidden][ple_dim], back to the hidden state
  Matrix ple_post_norm;      // [hidden], on that projection before its residual add
  std::vector<ExpertWeights> experts;  // sparse layers: in expert id order, the shared ones last

  // Every matrix of the layer, experts included.
  template <typename F>
  void for_each_matrix(F&& f) {
    for (Matrix* m : {&attn_norm, &wq, &wk, &wv, &wo, &bq, &bk, &bv, &bo, &sinks, &q_norm, &k_norm, &attn_out_norm, &ffn_norm,
                      &gate, &up, &down, &ffn_out_norm, &output_scale, &router, &router_bias, &router_scale, &expert_scale,
                      &expert_norm, &dense_out_norm, &expert_out_norm, &shared_expert_gate, &ple_gate, &ple_proj, &ple_post_norm})
      f(*m);
    for (ExpertWeights& e : experts)
      for (Matrix* m : {&e.gate, &e.up, &e.down, &e.gate_bias, &e.up_bias, &e.down_bias}) f(*m);
  }

  // The FFN's matrices: what a shard computes with (a sparse layer's router and experts;
  // a dense layer's gate, up and down).
  std::vector<Matrix*> ffn() {
    std::vector<Matrix*> out{&gate, &up, &down, &router, &router_bias, &shared_expert_gate};
    for (ExpertWeights& e : experts) out.insert(out.end(), {&e.gate, &e.up, &e.down, &e.gate_bias, &e.up_bias, &e.down_bias});
    return out;
  }
  std::vector<const Matrix*> ffn() const {
    std::vector<const Matrix*> out{&gate, &up, &down, &router, &router_bias, &shared_expert_gate};
    for (const ExpertWeights& e : experts)
      out.insert(out.end(), {&e.gate, &e.up, &e.down, &e.gate_bias, &e.up_bias, &e.down_bias});
    return out;
  }
};

struct Model {
  ModelConfig config;
  Matrix embed;              // [vocab][hidden]
  std::vector<LayerWeights> layers;
  Matrix final_norm;
  Matrix classifier;         // [vocab][hidden]; the embedding itself when tied
  Matrix rope_freqs;         // [max head_dim / 2] GGUF's frequency divisors (Llama 3, Gemma 4); empty otherwise
  Matrix ple_embed;          // per-layer embeddings: [ple_vocab][layers · ple_dim], one row read per token
  Matrix ple_model_proj;     // [layers · ple_dim][hidden], of the scaled embedding
  Matrix ple_proj_norm;      // [ple_dim], on each layer's part of that projection
  std::vector<std::shared_ptr<MappedFile>> files;  // keep the mappings alive
  // Weights a loader had to convert rather than view in place (GPT-OSS's Hugging Face
  // experts: their layout is not one the kernels read).
  std::vector<std::shared_ptr<const void>> converted;  // each frees its memory
  std::shared_ptr<HugePageRegion> huge_pages;      // the used weights, when copied there (huge_pages.h)
  std::vector<std::string> notes;  // what the loader skipped or assumed, for the commands to print

  // Every matrix, for what applies to all of them.
  template <typename F>
  void for_each_matrix(F&& f) {
    for (Matrix* m : {&embed, &final_norm, &classifier, &rope_freqs, &ple_embed, &ple_model_proj, &ple_proj_norm}) f(*m);
    for (LayerWeights& l : layers) l.for_each_matrix(f);
  }

  // How products with its bf16 weights are computed (dtype.h's Arithmetic).
  void use_arithmetic(Arithmetic a) {
    for_each_matrix([a](Matrix& m) { m.arithmetic = a; });
  }

  // How the FFN's products in layers [first, last] are computed: the name a shard gives as
  // ffn_arithmetic (PROTOCOL §8), and what a client compares with its own.
  RangeArithmetic ffn_arithmetic(size_t first, size_t last) const {
    RangeArithmetic a;
    for (size_t l = first; l <= last && l < layers.size(); ++l)
      for (const Matrix* m : layers[l].ffn()) a.add(*m);
    return a;
  }
  // The same over every product of layers [first, last] (attention, per-layer inputs and the
  // FFN): a session shard's layers_arithmetic (PROTOCOL §13).
  RangeArithmetic layers_arithmetic(size_t first, size_t last) const {
    RangeArithmetic a = ffn_arithmetic(first, last);
    for (size_t l = first; l <= last && l < layers.size(); ++l) {
      const LayerWeights& w = layers[l];
      for (const Matrix* m : {&w.wq, &w.wk, &w.wv, &w.wo, &w.ple_gate, &w.ple_proj}) a.add(*m);
    }
    return a;
  }
};

}  // namespace larql
