// Writes a loaded llama2.c model as a Hugging Face checkpoint directory, the way the
// usual export scripts do: q/k rows permuted for Hugging Face's half-split RoPE.
#pragma once

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "model/model.h"
#include "model/rope_rows.h"
#include "model/safetensors.h"
#include "model/tensor_names.h"

namespace larql::test {

inline std::vector<float> read_matrix(const Matrix& m) {
  std::vector<float> out(m.rows * m.cols);
  for (size_t i = 0; i < out.size(); ++i) out[i] = load_as_f32(m.dtype, m.data, i);
  return out;
}

// llama2.c pairs (2i, 2i+1) of a head become Hugging Face rows (i, i + head_dim/2).
inline std::vector<float> permute_for_half_rope(const Matrix& m, size_t heads, size_t head_dim) {
  return reorder_rope_rows(read_matrix(m), heads, head_dim, m.cols, RopeLayout::half_split);
}

inline void write_hf_checkpoint(const Model& m, const std::filesystem::path& dir, DType dtype) {
  const ModelConfig& c = m.config;
  std::filesystem::create_directories(dir);
  nlohmann::json config{{"model_type", "llama"},          {"hidden_size", c.hidden},
                        {"intermediate_size", c.ffn},     {"num_hidden_layers", c.layers},
                        {"num_attention_heads", c.heads}, {"num_key_value_heads", c.kv_heads},
                        {"vocab_size", c.vocab},          {"max_position_embeddings", c.context},
                        {"rms_norm_eps", c.norm_eps},     {"rope_theta", c.layer_configs.at(0).rope.theta},
                        {"hidden_act", "silu"},           {"tie_word_embeddings", m.classifier.data == m.embed.data},
                        {"bos_token_id", 1},              {"eos_token_id", 1}};
  std::ofstream(dir / "config.json") << config.dump(2);
  std::vector<TensorToWrite> t;
  auto add = [&](const std::string& name, std::vector<size_t> shape, const std::vector<float>& values) {
    t.push_back({name, dtype, std::move(shape), encode_tensor(dtype, values)});
  };
  for_each_tensor(m, [&](const TensorEntry& e, size_t layer, const Matrix& w) {
    if (e.hf.empty()) return;
    const std::vector<float> values = e.layer_member == &LayerWeights::wq   ? permute_for_half_rope(w, c.heads, c.head_dim)
                                      : e.layer_member == &LayerWeights::wk ? permute_for_half_rope(w, c.kv_heads, c.head_dim)
                                                                            : read_matrix(w);
    add(tensor_name(e, CheckpointFormat::hf, layer), tensor_shape(e, c, layer), values);
  });
  auto s = write_safetensors((dir / "model.safetensors").string(), t);
  if (!s) throw std::runtime_error(s.error().message);
}

}  // namespace larql::test
