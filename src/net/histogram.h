// A Prometheus histogram: how many observations fell at or below each bound, their sum and
// their count. Not synchronised: its owner holds a lock around it.
#pragma once

#include <cstdint>
#include <ostream>
#include <span>
#include <string>
#include <vector>

namespace larql {

class Histogram {
 public:
  explicit Histogram(std::span<const double> bounds) : bounds_(bounds.begin(), bounds.end()), buckets_(bounds.size()) {}
  void observe(double value);
  // `name`'s _bucket (cumulative, +Inf last), _sum and _count lines; `labels` is "" or
  // `key="value"`, put before le.
  void render(std::ostream& o, const std::string& name, const std::string& labels = "") const;
  uint64_t count() const { return count_; }

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> buckets_;
  uint64_t count_ = 0;
  double sum_ = 0;
};

}  // namespace larql
