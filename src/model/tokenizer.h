// What the engine needs of a tokenizer, whatever its file format.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/errors.h"

namespace larql {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  virtual size_t vocab_size() const = 0;
  // The ids `larql run --prompt` feeds the model: BOS and prefixes as the model expects.
  virtual std::vector<int> encode(std::string_view text) const = 0;
  // The vocabulary string of one id (what `larql tokenize --json` lists).
  virtual std::string piece(int id) const = 0;
  // The text of a sequence of ids, as the format's own decoder writes it.
  virtual std::string decode(std::span<const int> ids) const = 0;
  // One id's text on its own (a byte of a longer character stays that byte).
  std::string token_text(int id) const { return decode(std::span<const int>(&id, 1)); }
  // The bytes `id` adds in the middle of a text, exactly (a lone byte of a longer character
  // stays that byte, no start-of-text rule applies); nullopt for a token that stands for no
  // text (BOS, EOS, control tokens). What constrained decoding matches.
  virtual std::optional<std::string> token_bytes(int id) const = 0;
};

// Turns generated ids into text as they arrive. Each push returns the text that became
// final; bytes of a character split across tokens are held until it is complete.
class TextStream {
 public:
  // `context` is the token before the first pushed one (the prompt's last), so that
  // decoders that treat a sequence's start specially do not do so mid-text.
  TextStream(const Tokenizer& tokenizer, int context);
  std::string push(int token);
  // Whatever is still held (an incomplete character at the very end).
  std::string finish();

 private:
  const Tokenizer& tokenizer_;
  std::vector<int> window_;
  size_t emitted_ = 0;
};

}  // namespace larql
