// A GGUF file's tokenizer (tokenizer.ggml.* keys) as a tokenizer.json document, so the
// one Hugging Face tokenizer implementation serves both formats; and the reverse, for
// writing GGUF files. Two tokenizer models:
//   gpt2   byte-level BPE: tokens + merges; the pre-tokenizer regex by tokenizer.ggml.pre
//   llama  SentencePiece: tokens + scores, byte fallback (<0xXX>), ▁ for spaces; merges
//          are derived from the scores as Hugging Face's converter does
//   gemma4 SentencePiece-style BPE with its merges: ▁ for spaces, split only between runs
//          of newlines and the rest, merges over whole UTF-8 characters, byte fallback;
//          BOS always (llama.cpp's LLAMA_VOCAB_PRE_TYPE_GEMMA4)
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "model/gguf.h"
#include "model/tokenizer.h"

namespace larql {

Result<nlohmann::json> tokenizer_json_from_gguf(const GgufFile& file, const std::string& source);

Result<std::unique_ptr<Tokenizer>> load_gguf_tokenizer(const GgufFile& file, const std::string& source);

// tokenizer.ggml.* metadata for a tokenizer.json document (its BOS handling included);
// `gemma4` writes a SentencePiece-style file as llama.cpp's gemma4 model.
Result<std::map<std::string, GgufValue>> gguf_tokenizer_metadata(const nlohmann::json& tokenizer_json,
                                                                 const std::string& source, bool gemma4 = false);

}  // namespace larql
