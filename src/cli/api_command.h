#pragma once

#include <CLI/CLI.hpp>

namespace larql::cli {

// `larql api MODEL ...`: the OpenAI-compatible HTTP API, the FFN local or remote (--ffn).
void add_api_command(CLI::App& app);

}  // namespace larql::cli
