// Any bytes as an Accept header: never crashes, never picks a disabled encoding.
#include <string_view>

#include "fuzz_common.h"
#include "wire/accept.h"

using namespace larql::wire;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view accept(reinterpret_cast<const char*>(data), size);
  for (bool f16 : {false, true}) {
    for (bool i8 : {false, true}) {
      Encoding e = negotiate_response_encoding(accept, {.f16 = f16, .i8 = i8});
      larql::fuzz::check(e == Encoding::f32 || (e == Encoding::f16 && f16) || (e == Encoding::i8 && i8));
    }
  }
  for (const auto& r : parse_accept(accept)) larql::fuzz::check(r.q_millis >= 0 && r.q_millis <= 1000);
  return 0;
}
