#pragma once

#include <CLI/CLI.hpp>

namespace larql::cli {

// `larql export-llama2c IN OUT`: write a Llama as a llama2.c checkpoint (f32), for run.c.
void add_export_llama2c_command(CLI::App& app);

}  // namespace larql::cli
