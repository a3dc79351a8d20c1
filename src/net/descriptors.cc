#include "net/descriptors.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace larql {

DescriptorUse descriptor_use() {
  DescriptorUse use;
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return use;
  use.limit = limit.rlim_cur == RLIM_INFINITY ? size_t(1) << 30 : size_t(limit.rlim_cur);
  // A duplicate takes the lowest free number: every number below it is open.
  int probe = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 0);
  if (probe < 0 && errno == EBADF) probe = ::open("/dev/null", O_RDONLY | O_CLOEXEC);  // no stderr to copy
  if (probe >= 0) {
    use.lowest_free = size_t(probe);
    ::close(probe);
  } else if (errno == EMFILE) {
    use.lowest_free = use.limit;  // none free at all
  } else {
    use.limit = 0;  // unknown
  }
  return use;
}

bool descriptors_scarce(const DescriptorUse& use) {
  if (use.limit == 0) return false;  // unknown: let the request try
  const size_t margin = std::min<size_t>(64, use.limit / 4);
  return use.lowest_free + margin >= use.limit;
}

}  // namespace larql
