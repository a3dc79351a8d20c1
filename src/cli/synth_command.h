#pragma once

#include <CLI/CLI.hpp>

namespace larql::cli {

// `larql synth --out DIR ...`: write a random-weight Hugging Face checkpoint.
void add_synth_command(CLI::App& app);

}  // namespace larql::cli
