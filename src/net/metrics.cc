#include "net/metrics.h"

#include <sstream>

namespace larql {

void Metrics::count_error(ErrorCode code) {
  std::lock_guard lock(mutex_);
  ++errors_[std::string(error_code_name(code))];
}

void Metrics::observe_compute(uint32_t layer, double ms) {
  std::lock_guard lock(mutex_);
  compute_.try_emplace(layer, kBucketsMs).first->second.observe(ms);
}

std::string Metrics::render() const {
  std::ostringstream o;
  const std::string& p = prefix_;
  o << "# HELP " << p << "_requests_total Requests received on /v1/walk-ffn and /v1/walk-experts.\n# TYPE " << p << "_requests_total counter\n"
    << p << "_requests_total " << requests_ << "\n";
  o << "# HELP " << p << "_errors_total Error responses by protocol code.\n# TYPE " << p << "_errors_total counter\n";
  {
    std::lock_guard lock(mutex_);
    for (const auto& [code, n] : errors_) o << p << "_errors_total{code=\"" << code << "\"} " << n << "\n";
  }
  o << "# HELP " << p << "_bytes_total Message body bytes by direction and encoding.\n# TYPE " << p << "_bytes_total counter\n";
  for (const wire::EncodingInfo& info : wire::kEncodings) {
    const size_t e = size_t(info.encoding);
    o << p << "_bytes_total{direction=\"in\",encoding=\"" << info.name << "\"} " << bytes_in_[e] << "\n";
    o << p << "_bytes_total{direction=\"out\",encoding=\"" << info.name << "\"} " << bytes_out_[e] << "\n";
  }
  o << p << "_bytes_total{direction=\"in\",encoding=\"json\"} " << json_in_ << "\n";
  o << p << "_bytes_total{direction=\"out\",encoding=\"json\"} " << json_out_ << "\n";
  o << "# HELP " << p << "_f32_fallbacks_total Responses sent as f32 because f16/i8 could not carry a value.\n"
    << "# TYPE " << p << "_f32_fallbacks_total counter\n" << p << "_f32_fallbacks_total " << fallbacks_ << "\n";
  o << "# HELP " << p << "_cancelled_total Requests dropped between layers because the client had gone.\n"
    << "# TYPE " << p << "_cancelled_total counter\n" << p << "_cancelled_total " << cancelled_ << "\n";
  o << "# HELP " << p << "_coalesced_total Layer computations that ran in another request's matmul (same layer, waiting together).\n"
    << "# TYPE " << p << "_coalesced_total counter\n" << p << "_coalesced_total " << coalesced_ << "\n";
  o << "# HELP " << p << "_compute_ms FFN compute time per layer.\n# TYPE " << p << "_compute_ms histogram\n";
  std::lock_guard lock(mutex_);
  for (const auto& [layer, h] : compute_) h.render(o, p + "_compute_ms", "layer=\"" + std::to_string(layer) + "\"");
  return o.str();
}

}  // namespace larql
