#pragma once

#include <CLI/CLI.hpp>

namespace larql::cli {

// `larql router --shards SPEC ...`: the layer-range router in front of shards.
void add_router_command(CLI::App& app);

}  // namespace larql::cli
