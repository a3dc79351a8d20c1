// --no-huge-pages, for the commands that compute: by default the weights a process uses are
// copied to 2 MiB pages at start-up (model/huge_pages.h); this keeps them in the file's
// mapping instead. LARQL_HUGE_PAGES=0 says the same.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <cstring>

#include "base/errors.h"
#include "model/huge_pages.h"

namespace larql::cli {

inline void add_huge_pages_option(CLI::App* cmd, bool& off) {
  cmd->add_flag("--no-huge-pages", off,
                "compute on the weights in the file's mapping (4 KiB pages) instead of a copy on 2 MiB pages; "
                "also LARQL_HUGE_PAGES=0");
}

inline Status place_weights(Model& model, bool off, const HugePagePlacement& placement) {
  const char* env = std::getenv("LARQL_HUGE_PAGES");
  if (off || (env && std::strcmp(env, "0") == 0)) return Ok{};
  auto placed = place_on_huge_pages(model, placement);
  if (!placed) return placed.error();
  return Ok{};
}

}  // namespace larql::cli
