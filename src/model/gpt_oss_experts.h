// GPT-OSS's experts as transformers stores them, converted at load into the layout the
// kernels read (one matrix per expert and role, rows = outputs): the stored layouts are not
// ones a strided view can serve.
//
//   BF16/F16/F32: gate_up_proj [E][H][2·I] (inputs × outputs, gate and up interleaved: even
//                 columns gate, odd up), down_proj [E][I][H]; transposed here, per expert.
//   MXFP4:        gate_up_proj_blocks [E][2·I][H/32][16] and _scales [E][2·I][H/32] (rows are
//                 outputs, even gate, odd up), down_proj_blocks [E][H][I/32][16] and _scales;
//                 each block repacked as GGML's (mxfp4_block_from_hf).
//   biases:       gate_up_proj_bias [E][2·I] (interleaved, split here), down_proj_bias [E][H]
//                 (viewed in place).
//
// The converted bytes are the model's (Model::converted): the experts' size in memory
// rather than in the page cache (docs/benchmarks/history.md measures the load).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "model/tensor_names.h"

namespace larql {

// One MXFP4 block from transformers' layout (byte k: value 2k low nibble, 2k+1 high; the
// scale byte in a separate tensor) to GGML's 17 bytes (scale, then byte j: value j low,
// j + 16 high). The codes and the scale byte mean the same in both (GGML doubles the
// table and halves the scale). And back, for `larql synth`.
void mxfp4_block_from_hf(const uint8_t* hf_values, uint8_t scale, uint8_t* ggml_block);
void mxfp4_block_to_hf(const uint8_t* ggml_block, uint8_t* hf_values, uint8_t* scale);

// Layer l's experts and their biases (m.config set, m.layers sized, the router loaded),
// from whatever `find` returns under model.layers.{l}.mlp.experts.; errors name the tensor
// and what was expected, and an MXFP4 scale byte of 0xFF (NaN in the OCP format).
Status assemble_gpt_oss_experts(Model& m, size_t l, const std::string& source,
                                const std::function<std::optional<FoundTensor>(const std::string& name)>& find);

}  // namespace larql
