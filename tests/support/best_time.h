// The shortest of five runs, in seconds. Tests that guard speed compare two such times
// taken in the same run (a ratio), never an absolute time.
#pragma once

#include <algorithm>
#include <chrono>

namespace larql::test {

template <class F>
double best_of_five_seconds(F&& run) {
  double best = 1e9;
  for (int rep = 0; rep < 5; ++rep) {
    const auto start = std::chrono::steady_clock::now();
    run();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

}  // namespace larql::test
