// Any bytes as a JSON request or response body.
#include <cmath>
#include <string_view>

#include "fuzz_common.h"
#include "wire/json_codec.h"

using namespace larql::wire;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  for (size_t hidden : larql::fuzz::kHiddenSizes) {
    if (auto req = parse_json_request(body, hidden)) {
      larql::fuzz::check(req->residual.size() == size_t{req->seq_len} * hidden && !req->layers.empty());
      for (float v : req->residual) larql::fuzz::check(std::isfinite(v));
    }
    (void)parse_json_response(body, hidden);
  }
  return 0;
}
