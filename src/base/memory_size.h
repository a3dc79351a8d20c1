// The machine's memory, for the defaults of caches bounded by a share of it.
#pragma once

#include <unistd.h>

#include <cstddef>

namespace larql {

// A quarter of the physical memory (1 GiB where the system does not say).
inline size_t quarter_of_memory() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? size_t(pages) * size_t(page) / 4 : size_t(1) << 30;
}

}  // namespace larql
