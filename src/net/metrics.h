// Counters a server exposes on GET /metrics in the Prometheus text format.
#pragma once

#include <array>
#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "base/errors.h"
#include "net/histogram.h"
#include "wire/encoding.h"

namespace larql {

class Metrics {
 public:
  explicit Metrics(std::string prefix) : prefix_(std::move(prefix)) {}
  void count_request() { ++requests_; }
  void count_error(ErrorCode code);
  void count_bytes_in(wire::Encoding e, size_t n) { bytes_in_[size_t(e)] += n; }
  void count_bytes_out(wire::Encoding e, size_t n) { bytes_out_[size_t(e)] += n; }
  void count_json_bytes(size_t in, size_t out) {
    json_in_ += in;
    json_out_ += out;
  }
  void count_f32_fallback() { ++fallbacks_; }
  void count_cancelled() { ++cancelled_; }
  void count_coalesced(size_t n) { coalesced_ += n; }
  void observe_compute(uint32_t layer, double ms);
  uint64_t requests() const { return requests_; }

  std::string render() const;

 private:
  static constexpr std::array<double, 10> kBucketsMs{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100};
  std::string prefix_;
  std::atomic<uint64_t> requests_{0}, fallbacks_{0}, cancelled_{0}, coalesced_{0}, json_in_{0}, json_out_{0};
  std::array<std::atomic<uint64_t>, wire::kEncodingCount> bytes_in_{}, bytes_out_{};
  mutable std::mutex mutex_;
  std::map<std::string, uint64_t> errors_;
  std::map<uint32_t, Histogram> compute_;
};

}  // namespace larql
