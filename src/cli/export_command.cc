#include "cli/export_command.h"

#include <iostream>

#include "cli/command_model.h"
#include "model/llama2c_writer.h"

namespace larql::cli {

void add_export_llama2c_command(CLI::App& app) {
  struct Options {
    std::string in, out;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("export-llama2c", "Write a Llama model as a llama2.c checkpoint (f32, run.c's format)");
  cmd->add_option("in", o->in, "the model to read (Hugging Face directory, GGUF or llama2.c file; float weights)")->required();
  cmd->add_option("out", o->out, "the llama2.c .bin file to write")->required();
  cmd->callback([o] {
    auto fail = [](const std::string& message) {
      std::cerr << "larql export-llama2c: " << message << "\n";
      throw CLI::RuntimeError(1);
    };
    auto model = load_command_model("larql export-llama2c", o->in, std::nullopt);
    if (!model) fail(model.error().message);
    if (auto s = write_llama2c(*model, o->out); !s) fail(o->out + ": " + s.error().message);
    std::cerr << "wrote " << o->out << " (" << model->config.layers << " layers, vocab " << model->config.vocab
              << "; run.c feeds BOS = 1 and stops when it samples 1)\n";
  });
}

}  // namespace larql::cli
