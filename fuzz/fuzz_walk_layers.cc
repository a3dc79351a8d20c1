// Any bytes into the walk-layers parsers (PROTOCOL §13), for every encoding and a few hidden
// sizes: a request that parses re-frames to the same bytes (what a router's hop does with
// it), its values decode or are refused, and a response read back the same way.
#include <cstring>
#include <string>
#include <vector>

#include "base/byte_io.h"
#include "fuzz_common.h"
#include "wire/session_codec.h"

using namespace larql::wire;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Bytes body(data, size);
  for (const EncodingInfo& info : kEncodings) {
    const Encoding e = info.encoding;
    for (size_t hidden : larql::fuzz::kHiddenSizes) {
      if (auto view = parse_walk_layers_request(body, e, hidden, 64)) {
        std::string again;
        write_walk_layers_request(view->steps, view->tokens, view->values, again);
        larql::fuzz::check(again.size() == size && std::memcmp(again.data(), data, size) == 0);
        std::vector<float> values(view->total_rows * hidden);
        (void)decode_values(e, view->values, view->total_rows, hidden, values);
      }
      // A response of as many rows as its body holds.
      const auto row = values_byte_size(e, 1, hidden);
      if (!row || size < kWalkLayersHeader) continue;
      const uint64_t rows = (size - kWalkLayersHeader) / *row;
      if (auto view = parse_walk_layers_response(body, e, hidden, larql::load_u32(data), rows)) {
        std::string again;
        write_walk_layers_response(view->sessions, view->latency_ms, view->values, again);
        larql::fuzz::check(again.size() == size && std::memcmp(again.data(), data, size) == 0);
      }
    }
  }
  return 0;
}
