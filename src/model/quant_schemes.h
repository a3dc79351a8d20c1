// What `larql quantize --type NAME` writes, as one table: the base format of the 2-D
// weights, llama.cpp's file type, and whether llama.cpp's per-tensor rules apply
// (llama_tensor_get_type in llama.cpp's src/llama-quant.cpp, for the types listed):
//
//  - the classifier (`output`, or `token_embd` when the classifier is tied to it) is Q6_K,
//    or Q8_0 when its rows are not a multiple of 256 (q8_0 files keep it Q8_0);
//  - the _M mixes give Q6_K to `attn_v` and `ffn_down` on the layers use_more_bits picks:
//    the first and last eighth, and every third layer between;
//  - mixture-of-experts models (expert_count 8, as Mixtral): `attn_k` and `attn_v` are Q8_0
//    and, in Q4_K_M, `attn_output` Q5_K; the experts' ffn_down_exps follow ffn_down's rule
//    and their gate and up the base format; the router (ffn_gate_inp) is never quantised;
//  - mxfp4_moe (GPT-OSS's): the 3-D expert tensors MXFP4, every other 2-D weight (the
//    classifier and token_embd included) Q8_0, the router unquantised;
//  - a row length the chosen format's blocks do not divide falls back: Q4_K → Q5_0,
//    Q5_K → Q5_1, Q6_K → Q8_0, and then (or for the 32-value formats) to F16.
//
// 1-D tensors (norms, biases, rope_freqs) stay f32 in every scheme.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "kernels/dtype.h"
#include "model/tensor_names.h"

namespace larql {

struct QuantScheme {
  std::string_view name;  // as `larql quantize --type` takes it
  DType base;             // the 2-D weights' format before the rules above
  uint32_t llama_ftype;   // general.file_type (llama.cpp's enum llama_ftype)
  bool mixed;             // llama.cpp's per-tensor rules apply (its quantised file types)
  bool more_bits;         // the _M mixes' Q6_K for attn_v and ffn_down
  bool mxfp4_experts = false;  // mxfp4_moe: experts MXFP4, the rest `base` without llama.cpp's other rules
};

inline constexpr QuantScheme kQuantSchemes[] = {
    {"f32", DType::f32, 0, false, false},       {"f16", DType::f16, 1, false, false},
    {"bf16", DType::bf16, 32, false, false},    {"q8_0", DType::q8_0, 7, true, false},
    {"q4_0", DType::q4_0, 2, true, false},      {"q4_1", DType::q4_1, 3, true, false},
    {"q5_0", DType::q5_0, 8, true, false},      {"q5_1", DType::q5_1, 9, true, false},
    {"q4_k_m", DType::q4_k, 15, true, true},    {"q5_k_m", DType::q5_k, 17, true, true},
    {"q6_k", DType::q6_k, 18, true, false},     {"mxfp4_moe", DType::q8_0, 38, true, false, true},
};

constexpr const QuantScheme* find_quant_scheme(std::string_view name) {
  for (const auto& s : kQuantSchemes)
    if (s.name == name) return &s;
  return nullptr;
}

// llama.cpp's use_more_bits: the first and last eighth of the layers, and every third between.
constexpr bool use_more_bits(size_t layer, size_t layers) {
  const long i = long(layer), n = long(layers);
  return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

// The format a 2-D tensor is written in. `tied`: the model has no classifier of its own
// (token_embd serves as one). `pure`: no per-tensor rules, only the fallback. `experts`:
// the model's experts per layer (0: dense).
DType matrix_type(const QuantScheme& scheme, const TensorEntry& e, size_t layer, size_t layers, size_t cols, bool tied,
                  bool pure = false, size_t experts = 0);

// The format of a mixture-of-experts layer's stacked expert tensor (`down`: ffn_down_exps).
DType expert_matrix_type(const QuantScheme& scheme, bool down, size_t layer, size_t layers, size_t cols, bool pure = false);

}  // namespace larql
