// GGUF checkpoints (llama.cpp's format; architectures llama, qwen2, qwen3): the config
// from {arch}.* metadata, tensors mapped in place in their stored format, the tokenizer
// from tokenizer.ggml.*. And the way back: any loaded model as a GGUF file.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>

#include "kernels/thread_pool.h"
#include "model/gguf.h"
#include "model/model.h"
#include "model/quant_schemes.h"

namespace larql {

Result<ModelConfig> gguf_model_config(const GgufFile& file, const std::string& source);

Result<Model> load_gguf(const std::string& path);

// What export_gguf did to one tensor.
struct TensorWritten {
  std::string name;
  DType type;
  std::vector<size_t> shape;
  size_t index, count;           // this is tensor index + 1 of count
  double squared_error = 0;      // Σ (written − read)², over the values as written back
  double squared_values = 0;     // Σ read²
};

struct GgufExport {
  QuantScheme scheme = *find_quant_scheme("bf16");  // the 2-D weights' formats (quant_schemes.h)
  std::optional<std::string> tokenizer_json{};  // path; the file's tokenizer metadata
  size_t splits = 1;
  std::map<std::string, GgufValue> tokenizer_metadata{};  // tokenizer.* keys, when not from a tokenizer.json
  bool pure = false;                                    // no per-tensor rules (quant_schemes.h), only fallbacks
  ThreadPool* pool = nullptr;                           // quantises each tensor's rows in parallel
  std::function<void(const TensorWritten&)> progress{};  // after each tensor
};

// Writes `m` as GGUF (llama.cpp's key names and tensor layout, q/k rows permuted for
// the families llama.cpp permutes), each 2-D tensor in the format matrix_type chooses.
// Returns the file paths written.
Result<std::vector<std::string>> export_gguf(const Model& m, const std::string& path, const GgufExport& options);

}  // namespace larql
