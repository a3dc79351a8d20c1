// The llama2.c tokenizer file (tokenizer.bin): max_token_length, then per id a score, a
// length and the piece's bytes. Encoding follows run.c exactly: BOS = 1, a leading " "
// piece for non-empty text, UTF-8 code points looked up whole or as <0xXX> byte tokens
// (id = byte + 3), then greedy merges of the adjacent pair with the highest score.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "model/tokenizer.h"

namespace larql {

class Llama2cTokenizer : public Tokenizer {
 public:
  static Result<std::unique_ptr<Llama2cTokenizer>> load(const std::string& path, size_t expected_vocab = 0);

  size_t vocab_size() const override { return pieces_.size(); }
  std::vector<int> encode(std::string_view text) const override;
  std::string piece(int id) const override;
  // run.c's decode of each id after its predecessor (the first id is only context).
  std::string decode(std::span<const int> ids) const override;
  // <unk>, BOS and EOS stand for no text.
  std::optional<std::string> token_bytes(int id) const override;
  // The text `token` adds after `prev`, exactly as run.c prints it.
  std::string decode_step(int prev, int token) const;

  static constexpr int kBos = 1;

 private:
  int lookup(const std::string& s) const;
  // run.c's merges of adjacent pairs, in O(n log n).
  std::vector<int> merge_pairs(std::vector<int> tokens) const;

  std::vector<std::string> pieces_;
  std::vector<float> scores_;
  std::unordered_map<std::string, int> ids_;
};

}  // namespace larql
