// Any bytes into parse_response + decode_values for every record.
#include <vector>

#include "fuzz_common.h"
#include "wire/codec.h"

using namespace larql::wire;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Bytes body(data, size);
  for (const EncodingInfo& info : kEncodings) {
    const Encoding e = info.encoding;
    for (size_t hidden : larql::fuzz::kHiddenSizes) {
      auto view = parse_response(body, e, hidden);
      if (!view) continue;
      size_t total = 0;
      for (const auto& rec : view->records) {
        larql::fuzz::check(rec.values.data() >= data && rec.values.data() + rec.values.size() <= data + size);
        std::vector<float> values(size_t{rec.seq_len} * hidden);
        (void)decode_values(e, rec.values, rec.seq_len, hidden, values);
        total += rec.record_bytes.size();
      }
      larql::fuzz::check(total <= size);
    }
  }
  return 0;
}
