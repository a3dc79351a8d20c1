// `larql synth`: a Hugging Face-format checkpoint with random weights of realistic shape,
// for speed tests and benchmarks at sizes no trained model here has. Not for accuracy.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/dtype.h"
#include "wire/errors.h"

namespace larql {

struct SynthSpec {
  size_t hidden = 256;
  size_t layers = 2;
  size_t ffn = 688;
  size_t heads = 4;
  size_t kv_heads = 4;
  size_t vocab = 512;
  size_t context = 2048;
  DType dtype = DType::bf16;
  uint64_t seed = 0;
};

// Writes config.json, generation_config.json, model.safetensors and a byte-level
// tokenizer.json (256 byte tokens, the rest unused) into `dir`.
Status write_synthetic_checkpoint(const std::string& dir, const SynthSpec& spec);

}  // namespace larql
