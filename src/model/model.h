// A loaded model: its configuration (families are data, not forks of the forward pass)
// and views of its weights, in place in the memory-mapped files.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/dtype.h"
#include "kernels/ops.h"
#include "model/mapped_file.h"

namespace larql {

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
  float rope_theta = 10000.0f;
  RopeLayout rope_layout = RopeLayout::adjacent_pairs;
  std::optional<Llama3RopeScaling> rope_scaling;
  Activation activation = Activation::silu;
  bool qk_norm = false;            // Qwen3: RMSNorm on each head of q and k
  bool attention_bias = false;     // Qwen2: biases on q, k, v
  int bos_id = -1;                 // -1: none
  std::vector<int> eos_ids;        // generation stops at any of these

  size_t q_dim() const { return heads * head_dim; }
  size_t kv_dim() const { return kv_heads * head_dim; }
};

struct LayerWeights {
  Matrix attn_norm;
  Matrix wq, wk, wv, wo;
  Matrix bq, bk, bv;         // empty unless attention_bias
  Matrix q_norm, k_norm;     // empty unless qk_norm
  Matrix ffn_norm;
  Matrix gate, up, down;     // gate/up: [ffn][hidden], down: [hidden][ffn]
};

struct Model {
  ModelConfig config;
  Matrix embed;              // [vocab][hidden]
  std::vector<LayerWeights> layers;
  Matrix final_norm;
  Matrix classifier;         // [vocab][hidden]; the embedding itself when tied
  Matrix rope_freqs;         // [head_dim / 2] GGUF's Llama 3 frequency divisors; empty otherwise
  std::vector<std::shared_ptr<MappedFile>> files;  // keep the mappings alive
};

}  // namespace larql
