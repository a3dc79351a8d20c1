// Any bytes as a tokenizer.json: loading never crashes; a tokenizer that loads encodes
// and decodes a few strings, including invalid UTF-8, without crashing or producing ids
// outside its vocabulary.
#include <string_view>

#include "fuzz_common.h"
#include "memory_file.h"
#include "model/hf_tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const larql::fuzz::MemoryFile file(data, size);
  auto tok = larql::HfTokenizer::load(file.path());
  if (!tok) return 0;
  for (std::string_view text : {std::string_view("Hello world"), std::string_view(" \xff\xc3 ab\n"), std::string_view("")}) {
    const auto ids = (*tok)->encode(text);
    for (int id : ids) larql::fuzz::check(id >= 0 && size_t(id) < (*tok)->vocab_size());
    (void)(*tok)->decode(ids);
  }
  return 0;
}
