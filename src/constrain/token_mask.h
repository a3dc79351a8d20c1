// Which tokens may come next under a JSON grammar: the vocabulary as a trie of token bytes,
// walked once per step from the matcher's state, so a shared prefix is matched once and a
// rejected byte drops every token under it. Inside a free string, a subtree whose tokens are
// all plain text (no quote, backslash or control byte; whole UTF-8 characters) is taken
// whole without walking it: that is most of a vocabulary, and most of a JSON answer's steps.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "constrain/json_matcher.h"

namespace larql {

class Tokenizer;

class TokenTrie {
 public:
  // token_bytes[id]: what the token adds to text (Tokenizer::token_bytes); tokens with none
  // or empty ones are never allowed inside a value.
  explicit TokenTrie(const std::vector<std::optional<std::string>>& token_bytes);
  // The tokenizer's vocabulary; special tokens whose vocabulary string is one of `spelled`
  // count as that text (a chat format's marks that a grammar of tool calls writes).
  static TokenTrie of(const Tokenizer& tokenizer, const std::vector<std::string_view>& spelled = {});

  size_t vocab() const { return vocab_; }
  // The token's bytes (empty for one without text).
  const std::string& bytes(int id) const { return bytes_[size_t(id)]; }
  size_t nodes() const { return nodes_.size(); }
  // allowed[id] = 1 where `state` accepts the token's bytes and the value can still close in
  // `tokens_left` more tokens after it: its bytes to close are no more than that (a token
  // adds at least one byte), or it begins the path tokens_to_close finds and that path fits.
  // Tokens without text (the end tokens among them) are left 0: the caller decides those.
  void allowed(const JsonMatcher& state, size_t tokens_left, std::vector<uint8_t>& allowed) const;
  // The tokens of a path from `state` to a closed value in this vocabulary: at each step the
  // token after which the fewest bytes are left to close it (ties: the longest, then the
  // first by bytes); SIZE_MAX when it has not closed within `limit` tokens. A path, so a
  // reachable bound on what closing needs, usually far below its bytes. *first: the path's
  // first token (-1 when the value is closed already).
  size_t tokens_to_close(const JsonMatcher& state, size_t limit, int* first = nullptr) const;

 private:
  static constexpr uint32_t kNotPlain = UINT32_MAX;
  struct Node {
    uint32_t end = 0;             // preorder index just past the subtree
    uint32_t tokens_begin = 0;    // tokens_[tokens_begin, tokens_here) end at this node,
    uint32_t tokens_here = 0;     // tokens_[tokens_begin, tokens_end) in its subtree
    uint32_t tokens_end = 0;
    uint32_t plain_chars = kNotPlain;  // plain subtree: its longest token's characters
    uint32_t depth = 0;
    uint8_t byte = 0;
  };
  // Walks the trie from `state`: a plain subtree that `state` takes as text is handed whole
  // to on_plain(node) when `plain_whole` (and not walked); every node whose bytes `state`
  // accepts and where tokens end goes to on_tokens(node, state after its bytes).
  struct Node;
  template <typename OnPlain, typename OnTokens>
  void walk(const JsonMatcher& state, bool plain_whole, const OnPlain& on_plain, const OnTokens& on_tokens) const;
  // The token after which `state` has the fewest bytes left to close (as tokens_to_close
  // picks it), into `after`; -1 when no token continues it.
  int closest_token(const JsonMatcher& state, JsonMatcher& after) const;

  std::vector<Node> nodes_;  // preorder; nodes_[0] is the empty prefix
  std::vector<int> tokens_;  // ids ordered by bytes, so each subtree's are contiguous
  std::vector<std::string> bytes_;  // by id
  size_t vocab_ = 0;
  size_t longest_ = 0;
};

}  // namespace larql
