// What the engine needs of a tokenizer, whatever its file format.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "wire/errors.h"

namespace larql {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  virtual size_t vocab_size() const = 0;
  // The ids `larql run --prompt` feeds the model: BOS and prefixes as the model expects.
  virtual std::vector<int> encode(std::string_view text) const = 0;
  // The vocabulary string of one id (what `larql tokenize --json` lists).
  virtual std::string piece(int id) const = 0;
  // The text `token` adds when it follows `prev` in a generated stream.
  virtual std::string decode_step(int prev, int token) const = 0;
};

}  // namespace larql
