// Hugging Face tokenizer.json with a BPE model, in both flavours the Llama-family models
// use: byte-level (GPT-2 / Llama 3 / Qwen: regex pre-tokenizer via PCRE2, bytes mapped to
// printable characters) and SentencePiece-style (▁ for spaces, <0xXX> byte fallback).
// The pipeline is the file's: added tokens are split out first, then normalizer (NFC via
// utf8proc, Prepend, Replace, ...), pre-tokenizer, BPE merges by rank, post-processor
// template (BOS and friends); decoding runs the file's decoder chain.
#pragma once

#include <map>
#include <nlohmann/json_fwd.hpp>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "model/string_trie.h"
#include "model/tokenizer.h"

namespace larql {

class Regex;

class HfTokenizer : public Tokenizer {
 public:
  // Any file that is not a tokenizer.json this reader understands is an error naming the
  // file and what was wrong, never an exception or a crash (fuzz/fuzz_tokenizer_json.cc).
  static Result<std::unique_ptr<HfTokenizer>> load(const std::string& tokenizer_json_path);
  // The same from a parsed document (a GGUF file's tokenizer is turned into one);
  // `source` names it in errors.
  static Result<std::unique_ptr<HfTokenizer>> from_json(const nlohmann::json& doc, const std::string& source);
  ~HfTokenizer() override;

  size_t vocab_size() const override { return id_to_token_.size(); }
  // With the post-processor's special tokens, as Hugging Face's default encode does.
  std::vector<int> encode(std::string_view text) const override;
  // Without them.
  std::vector<int> encode_plain(std::string_view text) const;
  std::string piece(int id) const override;
  std::string decode(std::span<const int> ids) const override;
  std::optional<std::string> token_bytes(int id) const override;
  // Whether `id` is one of the file's added tokens (matched whole in raw text).
  bool is_added_token(int id) const;

  // Pipeline steps, parsed from the file (defined in hf_tokenizer.cc).
  struct NormalizerStep;
  struct PreTokenizerStep;
  struct DecoderStep;
  struct AddedToken {
    std::string content;
    int id;
    bool special, lstrip, rstrip;
  };

 private:
  // load() without the guard against fields of the wrong JSON type (nlohmann throws on those).
  static Result<std::unique_ptr<HfTokenizer>> from_document(const nlohmann::json& doc, const std::string& path);
  HfTokenizer();
  std::string normalize(std::string s) const;
  std::vector<std::string> pre_tokenize(const std::string& s, bool at_text_start) const;
  void bpe(const std::string& word, std::vector<int>& out) const;
  int token_id(const std::string& token) const;
  // The decoder chain over vocabulary strings; `lossy`: bytes that are no whole UTF-8
  // character become U+FFFD (decode), else they stay as they are (token_bytes).
  std::string decode_pieces(std::vector<std::string> tokens, bool lossy) const;

  std::unordered_map<std::string, int> vocab_;
  std::vector<std::string> id_to_token_;
  std::unordered_map<std::string, int> merge_rank_;  // "left\0right" → rank
  std::vector<AddedToken> added_;                    // longest first
  std::unordered_set<int> special_ids_;              // added tokens marked special
  std::string token_context_;                        // token_bytes' context: "a" as the decoders write it
  StringTrie added_at_;                              // content -> index into added_
  std::vector<NormalizerStep> normalizers_;
  std::vector<PreTokenizerStep> pre_tokenizers_;
  std::vector<DecoderStep> decoders_;
  std::vector<std::string> template_single_;  // "$A" for the sequence, else a special token's content
  std::map<std::string, std::vector<int>> template_ids_;
  int unk_id_ = -1;
  bool byte_fallback_ = false;
  bool fuse_unk_ = false;
  bool ignore_merges_ = false;
};

}  // namespace larql
