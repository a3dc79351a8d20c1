// Model families larql runs, as data: what differs between them in the forward pass, and
// their name in each checkpoint format. Hugging Face's model_type is `name`; GGUF's
// general.architecture is `gguf_arch` (llama.cpp writes Mistral as "llama").
#pragma once

#include <string_view>

namespace larql {

struct Family {
  std::string_view name;
  std::string_view gguf_arch;
  bool attention_bias;  // biases on q, k, v
  bool qk_norm;         // RMSNorm on each head of q and k
  // llama.cpp's converter permutes this family's q/k rows for adjacent-pair RoPE
  bool gguf_permutes_qk;
};

inline constexpr Family kFamilies[] = {
    {"llama", "llama", false, false, true},
    {"mistral", "llama", false, false, true},
    {"qwen2", "qwen2", true, false, false},
    {"qwen3", "qwen3", false, true, false},
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

}  // namespace larql
