// Any bytes as an Accept header: never crashes, never picks an encoding the server does
// not offer (every subset of the table is tried; f32 is always possible).
#include <string_view>

#include "fuzz_common.h"
#include "wire/accept.h"

using namespace larql::wire;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view accept(reinterpret_cast<const char*>(data), size);
  for (unsigned subset = 0; subset < (1u << kEncodingCount); ++subset) {
    EncodingSet offered;
    for (size_t i = 0; i < kEncodingCount; ++i)
      if (subset & (1u << i)) offered.insert(kEncodings[i].encoding);
    const Encoding e = negotiate_response_encoding(accept, offered);
    larql::fuzz::check(e == Encoding::f32 || offered.contains(e));
  }
  for (const auto& r : parse_accept(accept)) larql::fuzz::check(r.q_millis >= 0 && r.q_millis <= 1000);
  return 0;
}
