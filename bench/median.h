// The median the benchmarks report over their repetitions (the mean of the middle two
// when there is an even number).
#pragma once

#include <algorithm>
#include <vector>

namespace larql::bench {

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

}  // namespace larql::bench
