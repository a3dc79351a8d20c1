// Loads a model and its tokenizer by path, whatever the format:
// a llama2.c checkpoint file, or a Hugging Face directory.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "model/model.h"
#include "model/tokenizer.h"

namespace larql {

Result<Model> load_model(const std::string& path);

// The tokenizer for `model`: `explicit_path` when given (--tokenizer), otherwise the one
// the model's format carries (tokenizer.json in a Hugging Face directory). nullptr when
// there is none (a llama2.c checkpoint without --tokenizer).
Result<std::unique_ptr<Tokenizer>> load_tokenizer_for(const Model& model, const std::string& model_path,
                                                      const std::optional<std::string>& explicit_path);

}  // namespace larql
