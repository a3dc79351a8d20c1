#include "cli/quantize_command.h"

#include <filesystem>
#include <iostream>
#include <map>

#include "model/gguf_loader.h"
#include "model/loader.h"

namespace larql::cli {

void add_quantize_command(CLI::App& app) {
  struct Options {
    std::string in, out;
    DType type = DType::q8_0;
    size_t splits = 1;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("quantize", "Write a model (Hugging Face directory, llama2.c or GGUF file) as GGUF");
  cmd->add_option("in", o->in, "the model to read")->required();
  cmd->add_option("out", o->out, "the GGUF file to write")->required();
  std::map<std::string, DType> types;
  for (const auto& d : kDTypes) types.emplace(std::string(d.name), d.type);
  cmd->add_option("--type", o->type, "format of the 2-D weights (1-D ones stay f32)")
      ->transform(CLI::CheckedTransformer(types))
      ->capture_default_str();
  cmd->add_option("--splits", o->splits, "write NAME-0000i-of-0000N.gguf files")->capture_default_str()->check(CLI::PositiveNumber);
  cmd->callback([o] {
    auto model = load_model(o->in);
    if (!model) {
      std::cerr << "larql quantize: " << model.error().message << "\n";
      throw CLI::RuntimeError(1);
    }
    GgufExport options{o->type, std::nullopt, o->splits};
    const auto tokenizer = std::filesystem::path(o->in) / "tokenizer.json";
    if (std::filesystem::is_directory(o->in) && std::filesystem::exists(tokenizer)) options.tokenizer_json = tokenizer.string();
    else std::cerr << "larql quantize: " << o->in << " has no tokenizer.json; the GGUF file will carry no tokenizer\n";
    auto written = export_gguf(*model, o->out, options);
    if (!written) {
      std::cerr << "larql quantize: " << written.error().message << "\n";
      throw CLI::RuntimeError(1);
    }
    for (const auto& path : *written) std::cerr << "larql quantize: wrote " << path << "\n";
  });
}

}  // namespace larql::cli
