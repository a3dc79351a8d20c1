// GGUF checkpoints (llama.cpp's format; architectures llama, qwen2, qwen3): the config
// from {arch}.* metadata, tensors mapped in place in their stored format, the tokenizer
// from tokenizer.ggml.*. And the way back: any loaded model as a GGUF file.
#pragma once

#include <optional>
#include <string>

#include "model/gguf.h"
#include "model/model.h"

namespace larql {

Result<ModelConfig> gguf_model_config(const GgufFile& file, const std::string& source);

Result<Model> load_gguf(const std::string& path);

struct GgufExport {
  DType matrix_type = DType::bf16;  // for 2-D weights; 1-D ones (norms, biases) stay f32
  std::optional<std::string> tokenizer_json;  // path; the file's tokenizer metadata
  size_t splits = 1;
};

// Writes `m` as GGUF (llama.cpp's key names and tensor layout, q/k rows permuted for
// the families llama.cpp permutes). Matrices whose rows do not fit the type's blocks
// are written f16. Returns the file paths written.
Result<std::vector<std::string>> export_gguf(const Model& m, const std::string& path, const GgufExport& options);

}  // namespace larql
