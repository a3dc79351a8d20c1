// A byte-at-a-time recogniser of the JSON texts a JsonGrammar admits: a pushdown automaton
// with one small frame per open value. Structured output feeds it each token's bytes and
// asks, for every candidate token, whether its bytes can come next (token_mask.h).
//
// Values are spelled as the grammar's ValueSyntax says (JSON, or Gemma 4's tool-call syntax).
// The text is compact except for whitespace between tokens, as pretty-printers write it: in
// each gap at most one line break (\n or \r\n) and kMaxIndent spaces or tabs, so a model
// cannot pad forever; nothing precedes the value and nothing follows it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "constrain/json_schema.h"

namespace larql {

class JsonMatcher {
 public:
  static constexpr uint8_t kMaxIndent = 16;

  explicit JsonMatcher(const JsonGrammar& grammar) : grammar_(&grammar) {}
  JsonMatcher(const JsonMatcher& other) { *this = other; }
  // Copies only the frames in use (the mask walk copies a state per trie level).
  JsonMatcher& operator=(const JsonMatcher& other);

  // Whether `byte` can come next; if not, the state is left undefined (callers feed copies).
  bool feed(uint8_t byte);
  bool feed(std::string_view bytes);

  // The value is complete and nothing can follow it.
  bool closed() const { return done_; }
  // The text so far is a complete value that could still grow (a number at the top level).
  bool accepting() const;
  // The fewest bytes that complete the value (0 when closed).
  size_t bytes_to_close() const;
  // Whether any text of up to `chars` whole characters without a quote, backslash or
  // control byte can come next, as it is (inside a string with room for them).
  bool takes_plain_text(size_t chars) const;

 private:
  struct Frame {
    uint32_t node = 0;
    uint32_t index = 0;  // object: next property; array: items begun; string: characters; literal/number/wrapped: bytes
    uint32_t count = 0;  // object: key bytes matched, then the chosen property; string: next UTF-8 byte's range;
                     // number: 1 if signed; wrapped: the chosen text
    uint8_t phase = 0;
    uint8_t aux = 0;     // string: escape digits or continuation bytes still due; number: exponent digits
    uint8_t space = 0;   // the current gap: spaces and tabs (low bits), a line break (kBreak), a \r (kReturn)
    uint64_t set = 0;    // object: candidate keys (bit i: property index + i); literals: candidates
  };
  enum class Step { consumed, rejected, passed };

  bool begin_value(uint32_t node, uint8_t byte);
  void end_value();
  Step step(Frame& f, uint8_t byte);
  Step object_byte(Frame& f, const SchemaNode& n, uint8_t byte);
  Step array_byte(Frame& f, const SchemaNode& n, uint8_t byte);
  Step string_byte(Frame& f, const SchemaNode& n, uint8_t byte);
  Step number_byte(Frame& f, const SchemaNode& n, uint8_t byte);
  Step literal_byte(Frame& f, const SchemaNode& n, uint8_t byte);
  Step wrapped_byte(Frame& f, const SchemaNode& n, uint8_t byte);
  Step gemma_string_byte(Frame& f, const SchemaNode& n, uint8_t byte);
  Step character_byte(Frame& f, uint8_t byte);
  Step utf8_continuation(Frame& f, uint8_t byte);
  bool gemma() const { return grammar_->syntax() == ValueSyntax::gemma4; }
  // A byte of a bare key in an open object (Gemma 4): anything but what ends or opens a value.
  static bool bare_key_byte(uint8_t b) { return b > 0x20 && b != ':' && b != '}' && b != '{' && b != ',' && b != '<' && b != '"'; }
  static std::optional<Step> gap(Frame& f, uint8_t byte);
  bool start_key(Frame& f, const SchemaNode& n);
  size_t frame_to_close(const Frame& f) const;

  const JsonGrammar* grammar_;
  std::array<Frame, JsonGrammar::kMaxDepth> frames_;
  uint8_t depth_ = 0;  // frames in use; 0 and not done: the value has not begun
  bool done_ = false;
};

}  // namespace larql
