// Any bytes as a GGUF file: the header and metadata parser never crashes; an accepted
// file's tensors lie inside it with the byte count their type and shape need; its model
// config and tokenizer metadata are read without crashing either.
#include "fuzz_common.h"
#include "model/gguf.h"
#include "model/gguf_loader.h"
#include "model/gguf_tokenizer.h"
#include "model/hf_tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto f = larql::parse_gguf(data, size, "fuzz.gguf");
  if (!f) return 0;
  for (const auto& [name, t] : f->tensors) {
    if (!t.dtype) continue;
    size_t n = 1;
    for (size_t d : t.shape) n *= d;
    larql::fuzz::check(t.bytes == larql::dtype_bytes(*t.dtype, n));
    larql::fuzz::check(t.data >= data && t.bytes <= size_t(data + size - t.data));
  }
  (void)larql::gguf_model_config(*f, "fuzz.gguf");
  auto doc = larql::tokenizer_json_from_gguf(*f, "fuzz.gguf");
  if (doc) {
    auto tok = larql::HfTokenizer::from_json(*doc, "fuzz.gguf");
    if (tok) (void)(*tok)->encode("Hello, world! 123");
  }
  return 0;
}
