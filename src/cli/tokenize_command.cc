#include "cli/tokenize_command.h"

#include <iostream>
#include <nlohmann/json.hpp>

#include "model/loader.h"

namespace larql::cli {

void add_tokenize_command(CLI::App& app) {
  struct Options {
    std::string path, text;
    bool json = false;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("tokenize", "Encode text as `larql run --prompt` does and print the ids");
  cmd->add_option("path", o->path, "a Hugging Face model directory, a tokenizer.json, or a llama2.c tokenizer file")->required();
  cmd->add_option("--text", o->text, "text to encode")->required();
  cmd->add_flag("--json", o->json, R"(print {"ids": [...], "tokens": [...]})");
  cmd->callback([o] {
    auto tok = load_tokenizer_file(o->path);
    if (!tok) {
      std::cerr << "larql tokenize: " << tok.error().message << "\n";
      throw CLI::RuntimeError(1);
    }
    const std::vector<int> ids = (*tok)->encode(o->text);
    if (o->json) {
      // Pieces may hold partial UTF-8 (byte tokens): invalid bytes print as U+FFFD.
      nlohmann::json out{{"ids", ids}, {"tokens", nlohmann::json::array()}};
      for (int id : ids) out["tokens"].push_back((*tok)->piece(id));
      std::cout << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    } else {
      for (size_t i = 0; i < ids.size(); ++i) std::cout << (i ? " " : "") << ids[i];
      std::cout << "\n";
    }
  });
}

}  // namespace larql::cli
