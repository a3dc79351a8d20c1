// What a server process holds, read from /proc: resident memory and open descriptors,
// before a load, after it, and once it has settled, so a leak shows as a number.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <vector>

namespace larql::loadtest {

struct ProcessSample {
  bool alive = false;
  size_t rss_bytes = 0;
  size_t descriptors = 0;
};

ProcessSample sample_process(pid_t pid);

// Whether `now` is back near `baseline`, a sample taken after a warm-up load (allocators
// keep what the first requests' threads freed: the router went from 8 to 16 MB in its
// first seconds and stayed there for 2 minutes, docs/benchmarks/history.md): resident memory within
// 20% + 4 MiB of it (unless `judge_memory` is off: AddressSanitizer keeps freed memory),
// descriptors within 10 (the load harness's recovery rule).
bool recovered(const ProcessSample& baseline, const ProcessSample& now, bool judge_memory = true);

// Samples every 250 ms until every process has recovered, one has exited, or `limit`
// passes; returns the last samples and how long it took.
struct Settled {
  std::vector<ProcessSample> samples;
  double seconds = 0;
};
Settled wait_until_recovered(const std::vector<pid_t>& pids, const std::vector<ProcessSample>& baselines,
                             std::chrono::milliseconds limit, bool judge_memory);

}  // namespace larql::loadtest
