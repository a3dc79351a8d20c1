// Any bytes into parse_expert_request, check_assignments and decode_values, for every
// encoding and a few hidden sizes. A message that passes re-encodes to the same bytes
// (f32/f16); its assignments split by any expert range and put back give the same sums.
#include <cstring>
#include <string>
#include <vector>

#include "fuzz_common.h"
#include "wire/expert_codec.h"

using namespace larql::wire;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Bytes body(data, size);
  for (const EncodingInfo& info : kEncodings) {
    const Encoding e = info.encoding;
    for (size_t hidden : larql::fuzz::kHiddenSizes) {
      auto view = parse_expert_request(body, e, hidden);
      if (!view) continue;
      if (!check_assignments(view->assignments, view->rows, 64)) continue;
      const size_t rows = view->rows;
      std::vector<float> values(rows * hidden);
      if (!decode_values(e, view->values, rows, hidden, values)) continue;
      // Every split of the experts covers each assignment once, with valid renumbered rows.
      const uint32_t cut = view->assignments.front().expert;
      const ExpertPart low = take_expert_range(view->assignments, 0, cut), high = take_expert_range(view->assignments, cut + 1, 63);
      larql::fuzz::check(low.sources.size() + high.sources.size() == view->assignments.size());
      for (const ExpertPart* part : {&low, &high})
        if (!part->assignments.empty())
          larql::fuzz::check(check_assignments(part->assignments, uint32_t(part->rows.size()), 64).ok());
      if (e == Encoding::i8 || e == Encoding::q8) continue;  // re-quantising need not reproduce arbitrary bytes
      std::string again;
      auto enc = encode_expert_request(e, view->layer, view->rows, view->expert_rows(), view->assignments, hidden, values, again);
      larql::fuzz::check(enc.ok() && !enc->fell_back);
      // Flags beyond bits 0 and 1 are not kept.
      if ((view->flags & ~3u) == 0) larql::fuzz::check(again.size() == size && std::memcmp(again.data(), data, size) == 0);
    }
  }
  return 0;
}
