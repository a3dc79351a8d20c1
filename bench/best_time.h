// The shortest of `reps` runs of a callable, in seconds: what a benchmark reports when the
// fastest run is the one least disturbed by the machine.
#pragma once

#include <algorithm>
#include <chrono>

namespace larql::bench {

template <typename F>
double best_seconds(int reps, F&& f) {
  double best = 1e9;
  for (int rep = 0; rep < reps; ++rep) {
    const auto start = std::chrono::steady_clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

}  // namespace larql::bench
