#pragma once

#include <CLI/CLI.hpp>

namespace larql::cli {

// `larql plan MODEL --machines "a=24G,b=16G"`: which machine holds which layers (or experts),
// the shard map, and the command to run on each, from the model's headers only.
void add_plan_command(CLI::App& app);

}  // namespace larql::cli
