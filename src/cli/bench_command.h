#pragma once

#include <CLI/CLI.hpp>

namespace larql::cli {

// `larql bench MODEL --ffn URL ...`: accuracy, bytes and time of each wire format.
void add_bench_command(CLI::App& app);

}  // namespace larql::cli
