// Any bytes as the text a user sends (an API prompt, a chat message): the two tokenizer
// kinds of the tokenizer.json seeds (byte-level BPE; SentencePiece-style with byte
// fallback) encode it to ids inside their vocabulary and decode those ids, without
// crashing, whatever the bytes (invalid UTF-8 included).
#include <memory>
#include <string_view>
#include <vector>

#include "fuzz_common.h"
#include "model/hf_tokenizer.h"

namespace {

std::vector<std::unique_ptr<larql::HfTokenizer>> tokenizers;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  for (const char* seed : {"seed0", "seed1"}) {
    auto tok = larql::HfTokenizer::load(std::string(LARQL_TOKENIZER_SEEDS) + "/" + seed);
    larql::fuzz::check(tok.ok());
    tokenizers.push_back(std::move(*tok));
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  for (const auto& tok : tokenizers) {
    const auto ids = tok->encode(text);
    for (int id : ids) larql::fuzz::check(id >= 0 && size_t(id) < tok->vocab_size());
    (void)tok->decode(ids);
  }
  return 0;
}
