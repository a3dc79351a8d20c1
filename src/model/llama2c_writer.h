// Writes a model as a llama2.c checkpoint (run.c's format, see llama2c_loader.h): f32
// tensors, q/k rows in the adjacent-pairs RoPE layout. Only what run.c computes can be
// written: a Llama with RMSNorm ε 1e-5, RoPE θ 10000 on every pair, SwiGLU, no biases and
// float weights; anything else is refused by name rather than written as another model.
#pragma once

#include <string>

#include "base/errors.h"
#include "model/model.h"

namespace larql {

Status write_llama2c(const Model& model, const std::string& path);

}  // namespace larql
