// Shared by the fuzz targets: hidden sizes to try every input with, and a hard check.
#pragma once

#include <cstddef>
#include <cstdlib>

namespace larql::fuzz {

inline constexpr size_t kHiddenSizes[] = {1, 2, 3, 4, 32, 64};

inline void check(bool ok) {
  if (!ok) __builtin_trap();
}

}  // namespace larql::fuzz
