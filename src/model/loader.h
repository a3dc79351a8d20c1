// Loads a model and its tokenizer by path, whatever the format:
// a llama2.c checkpoint file, a GGUF file (by its magic), or a Hugging Face directory.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "model/model.h"
#include "model/tokenizer.h"

namespace larql {

Result<Model> load_model(const std::string& path);

// The tokenizer for `model`: `explicit_path` when given (--tokenizer), otherwise the one
// the model's format carries (tokenizer.json in a Hugging Face directory, a GGUF file's metadata). nullptr when
// there is none (a llama2.c checkpoint without --tokenizer).
// A tokenizer file by itself: tokenizer.json (or a directory holding one), else a
// llama2.c tokenizer (its piece count must equal expected_vocab when that is not 0).
Result<std::unique_ptr<Tokenizer>> load_tokenizer_file(const std::string& path, size_t expected_vocab = 0);

Result<std::unique_ptr<Tokenizer>> load_tokenizer_for(const Model& model, const std::string& model_path,
                                                      const std::optional<std::string>& explicit_path);

}  // namespace larql
