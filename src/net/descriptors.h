// File descriptors as a resource a server can run out of: every connection, in and out,
// is one. A router sheds work with 503 while few are left, rather than failing requests
// (and health checks) with "Too many open files".
#pragma once

#include <cstddef>

namespace larql {

struct DescriptorUse {
  size_t lowest_free = 0;  // descriptors are handed out lowest first: at least this many are open
  size_t limit = 0;        // the soft RLIMIT_NOFILE
};

DescriptorUse descriptor_use();

// Whether fewer than a quarter of the limit (at most 64) are left: the margin a router keeps
// for the connections of requests already admitted.
bool descriptors_scarce(const DescriptorUse& use);

}  // namespace larql
