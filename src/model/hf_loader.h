// Hugging Face checkpoints: a directory with config.json and model.safetensors (or a
// sharded model.safetensors.index.json), for model_type llama, mistral, qwen2 and qwen3.
// Weights stay in their stored dtype (f32, f16 or bf16), mapped in place.
#pragma once

#include <string>

#include "model/model.h"

namespace larql {

// Reads config.json (and generation_config.json for BOS/EOS where present).
Result<ModelConfig> read_hf_config(const std::string& dir);

Result<Model> load_hf_directory(const std::string& dir);

}  // namespace larql
