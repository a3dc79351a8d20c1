#pragma once

#include <CLI/CLI.hpp>

namespace larql::cli {

// `larql serve MODEL --layers A-B ...`: an FFN shard server.
void add_serve_command(CLI::App& app);

}  // namespace larql::cli
