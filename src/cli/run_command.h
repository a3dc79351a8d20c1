#pragma once

#include <CLI/CLI.hpp>

namespace larql::cli {

// `larql run MODEL ...`: generate text, the FFN local or remote (--ffn).
void add_run_command(CLI::App& app);

}  // namespace larql::cli
