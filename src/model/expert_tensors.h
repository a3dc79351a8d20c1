// The tensors of a mixture-of-experts layer, in every layout checkpoints use, once: the
// router, and each expert's gate, up and down projections per expert (2-D), stacked by
// role (3-D [experts][rows][cols]) or with gate and up stacked together (gate rows first).
// The loaders, `larql synth` and the GGUF writer name them through these functions.
#pragma once

#include <string>
#include <vector>

#include "model/families.h"
#include "model/tensor_names.h"

namespace larql {

enum class ExpertRole { gate, up, down };

// Hugging Face names (model.layers.{L}. prefix included).
std::string hf_router_name(const MoeNames& n, size_t layer);
std::string hf_expert_name(const MoeNames& n, size_t layer, size_t expert, ExpertRole role);
std::string hf_stacked_gate_up_name(const MoeNames& n, size_t layer);  // [E][2·I][H]
std::string hf_stacked_down_name(const MoeNames& n, size_t layer);     // [E][H][I]
std::string hf_router_bias_name(const MoeNames& n, size_t layer);      // GPT-OSS: [E]; empty where the family has none
std::string hf_shared_expert_name(const MoeNames& n, size_t layer, ExpertRole role);  // Qwen2-MoE: mlp.shared_expert.*_proj

// GGUF names (blk.{L}. prefix included).
std::string gguf_router_name(size_t layer);                             // ffn_gate_inp [E][H]
std::string gguf_stacked_name(size_t layer, ExpertRole role);           // ffn_{gate,up,down}_exps
std::string gguf_stacked_gate_up_name(size_t layer);                    // ffn_gate_up_exps [E][2·I][H]
std::string gguf_expert_name(size_t layer, size_t expert, ExpertRole role);  // old Mixtral files: ffn_gate.E
std::string gguf_router_bias_name(size_t layer);                        // GPT-OSS: ffn_gate_inp.bias [E]
std::string gguf_stacked_bias_name(size_t layer, ExpertRole role);      // GPT-OSS: ffn_{gate,up,down}_exps.bias [E][rows]
std::string gguf_shared_expert_name(size_t layer, ExpertRole role);     // Qwen2-MoE: ffn_{gate,up,down}_shexp

// An expert's matrix of a role.
inline Matrix ExpertWeights::*expert_matrix(ExpertRole role) {
  return role == ExpertRole::gate ? &ExpertWeights::gate : role == ExpertRole::up ? &ExpertWeights::up : &ExpertWeights::down;
}

// An expert's bias of a role (GPT-OSS's).
inline Matrix ExpertWeights::*expert_bias(ExpertRole role) {
  return role == ExpertRole::gate ? &ExpertWeights::gate_bias : role == ExpertRole::up ? &ExpertWeights::up_bias : &ExpertWeights::down_bias;
}

// Fills the router and experts of m's sparse layers (m.config.moe and layer_configs set,
// m.layers sized; a shared expert after the routed ones) from whatever `find` returns,
// checking shapes and formats as assemble_model does. `names` is the family's (Hugging Face only).
Status assemble_experts(Model& m, CheckpointFormat format, const MoeNames* names, const std::string& source,
                        const std::function<std::optional<FoundTensor>(const std::string& name)>& find);

}  // namespace larql
