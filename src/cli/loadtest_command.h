#pragma once

#include <CLI/CLI.hpp>

namespace larql::cli {

// `larql loadtest URL ...`: concurrent mixed traffic and malformed HTTP against a shard
// or router, with the servers' memory and descriptors watched.
void add_loadtest_command(CLI::App& app);

}  // namespace larql::cli
