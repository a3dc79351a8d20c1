#pragma once

#include <CLI/CLI.hpp>

namespace larql::cli {

// `larql quantize IN OUT --type T`: write a model as a GGUF file in one weight format.
void add_quantize_command(CLI::App& app);

}  // namespace larql::cli
