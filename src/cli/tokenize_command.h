#pragma once

#include <CLI/CLI.hpp>

namespace larql::cli {

// `larql tokenize PATH --text TEXT [--json]`: the ids `larql run --prompt` would feed.
void add_tokenize_command(CLI::App& app);

}  // namespace larql::cli
