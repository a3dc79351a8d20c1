// Any bytes as a .safetensors file: never crashes; an accepted file's tensors lie inside
// it and their byte counts match dtype × shape.
#include "fuzz_common.h"
#include "memory_file.h"
#include "model/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const larql::fuzz::MemoryFile file(data, size);
  auto st = larql::read_safetensors(file.path());
  if (!st) return 0;
  for (const auto& [name, t] : st->tensors) {
    size_t n = 1;
    for (size_t d : t.shape) n *= d;
    larql::fuzz::check(t.bytes == larql::dtype_bytes(t.dtype, n));
    if (t.bytes > 0) {
      volatile uint8_t first = t.data[0], last = t.data[t.bytes - 1];  // ASan checks both ends are mapped
      (void)first;
      (void)last;
    }
  }
  return 0;
}
