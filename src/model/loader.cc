#include "model/loader.h"

#include <filesystem>

#include "model/gguf_loader.h"
#include "model/gguf_tokenizer.h"
#include "model/hf_loader.h"
#include "model/hf_tokenizer.h"
#include "model/llama2c_loader.h"
#include "model/llama2c_tokenizer.h"

namespace larql {

Result<Model> load_model(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(path, ec)) return make_error(ErrorCode::invalid_argument, path + ": no such file or directory");
  if (fs::is_directory(path, ec)) return load_hf_directory(path);
  if (is_gguf_file(path)) return load_gguf(path);  // by its magic, whatever the name
  return load_llama2c(path);
}

Result<std::unique_ptr<Tokenizer>> load_tokenizer_file(const std::string& path, size_t expected_vocab) {
  namespace fs = std::filesystem;
  if (fs::is_directory(path)) return load_tokenizer_file((fs::path(path) / "tokenizer.json").string(), expected_vocab);
  if (is_gguf_file(path)) {
    auto file = read_gguf(path);
    if (!file) return file.error();
    return load_gguf_tokenizer(*file, path);
  }
  if (fs::path(path).extension() == ".json") {
    auto tok = HfTokenizer::load(path);
    if (!tok) return tok.error();
    return std::unique_ptr<Tokenizer>(std::move(*tok));
  }
  auto tok = Llama2cTokenizer::load(path, expected_vocab);
  if (!tok) return tok.error();
  return std::unique_ptr<Tokenizer>(std::move(*tok));
}

Result<std::unique_ptr<Tokenizer>> load_tokenizer_for(const Model& model, const std::string& model_path,
                                                      const std::optional<std::string>& explicit_path) {
  namespace fs = std::filesystem;
  if (explicit_path) return load_tokenizer_file(*explicit_path, model.config.vocab);
  const fs::path bundled = fs::path(model_path) / "tokenizer.json";
  if (fs::is_directory(model_path) && fs::exists(bundled)) return load_tokenizer_file(bundled.string(), 0);
  if (!fs::is_directory(model_path) && is_gguf_file(model_path)) return load_tokenizer_file(model_path, 0);
  return std::unique_ptr<Tokenizer>();
}

}  // namespace larql
