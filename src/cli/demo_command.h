#pragma once

#include <CLI/CLI.hpp>

namespace larql::cli {

// `larql demo [MODEL]`: the whole grid on one machine, end to end.
void add_demo_command(CLI::App& app);

}  // namespace larql::cli
