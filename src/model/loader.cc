#include "model/loader.h"

#include <filesystem>

#include "model/hf_loader.h"
#include "model/llama2c_loader.h"
#include "model/llama2c_tokenizer.h"

namespace larql {

Result<Model> load_model(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(path, ec)) return make_error(ErrorCode::invalid_argument, path + ": no such file or directory");
  if (fs::is_directory(path, ec)) return load_hf_directory(path);
  return load_llama2c(path);
}

Result<std::unique_ptr<Tokenizer>> load_tokenizer_for(const Model& model, const std::string& model_path,
                                                      const std::optional<std::string>& explicit_path) {
  if (!explicit_path) return std::unique_ptr<Tokenizer>();
  auto tok = Llama2cTokenizer::load(*explicit_path, model.config.vocab);
  if (!tok) return tok.error();
  return std::unique_ptr<Tokenizer>(std::move(*tok));
}

}  // namespace larql
