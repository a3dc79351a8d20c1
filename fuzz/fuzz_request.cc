// Any bytes into parse_request + decode_values, for every encoding and a few hidden
// sizes. A message that parses and decodes re-encodes to the same bytes (f32/f16).
#include <cstring>
#include <string>
#include <vector>

#include "fuzz_common.h"
#include "wire/codec.h"

using namespace larql::wire;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Bytes body(data, size);
  for (const EncodingInfo& info : kEncodings) {
    const Encoding e = info.encoding;
    for (size_t hidden : larql::fuzz::kHiddenSizes) {
      auto view = parse_request(body, e, hidden);
      if (!view) continue;
      const size_t rows = view->header.seq_len;
      std::vector<float> values(rows * hidden);
      if (!decode_values(e, view->values, rows, hidden, values)) continue;
      if (e == Encoding::i8 || e == Encoding::q8) continue;  // re-quantising need not reproduce arbitrary q bytes or scales
      RequestHeader header = view->header;
      std::string again;
      auto enc = encode_request(e, header, hidden, values, again);
      larql::fuzz::check(enc.ok() && !enc->fell_back);
      // A message in the layout we write (one layer single, more batched) comes back byte for byte.
      if (header.batch == (header.layers.size() > 1))
        larql::fuzz::check(again.size() == size && std::memcmp(again.data(), data, size) == 0);
    }
  }
  return 0;
}
