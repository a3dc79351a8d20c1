#pragma once

#include <CLI/CLI.hpp>

namespace larql::cli {

// `larql perplexity MODEL --file TEXT`: llama.cpp-style perplexity, local or through a grid.
void add_perplexity_command(CLI::App& app);

}  // namespace larql::cli
