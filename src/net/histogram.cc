#include "net/histogram.h"

namespace larql {

void Histogram::observe(double value) {
  for (size_t i = 0; i < bounds_.size(); ++i)
    if (value <= bounds_[i]) ++buckets_[i];
  ++count_;
  sum_ += value;
}

void Histogram::render(std::ostream& o, const std::string& name, const std::string& labels) const {
  const std::string before_le = labels.empty() ? "" : labels + ",";
  for (size_t i = 0; i < bounds_.size(); ++i)
    o << name << "_bucket{" << before_le << "le=\"" << bounds_[i] << "\"} " << buckets_[i] << "\n";
  o << name << "_bucket{" << before_le << "le=\"+Inf\"} " << count_ << "\n";
  const std::string braces = labels.empty() ? "" : "{" + labels + "}";
  o << name << "_sum" << braces << " " << sum_ << "\n";
  o << name << "_count" << braces << " " << count_ << "\n";
}

}  // namespace larql
