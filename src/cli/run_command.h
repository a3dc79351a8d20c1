#pragma once

#include <CLI/CLI.hpp>

namespace larql::cli {

// `larql run MODEL ...`: generate text with the FFN local (or, later, remote).
void add_run_command(CLI::App& app);

}  // namespace larql::cli
