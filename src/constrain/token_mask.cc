#include "constrain/token_mask.h"

#include <algorithm>
#include <utility>

#include "model/tokenizer.h"

namespace larql {

namespace {

// A prefix's bytes as plain string text: no quote, backslash or control byte, and UTF-8 as
// the matcher takes it (continuation ranges that exclude overlong forms and surrogates).
struct PlainPath {
  bool ok = true;
  uint8_t due = 0;           // continuation bytes still to come
  uint8_t lo = 0x80, hi = 0xBF;  // the next continuation byte's range
  uint32_t chars = 0;

  PlainPath then(uint8_t b) const {
    PlainPath p = *this;
    if (!ok) return p;
    if (due > 0) {
      if (b < lo || b > hi) p.ok = false;
      --p.due;
      p.lo = 0x80, p.hi = 0xBF;
      return p;
    }
    ++p.chars;
    if (b < 0x80) {
      p.ok = b >= 0x20 && b != '"' && b != '\\';
    } else if (b >= 0xC2 && b <= 0xDF) {
      p.due = 1;
    } else if (b >= 0xE0 && b <= 0xEF) {
      p.due = 2;
      if (b == 0xE0) p.lo = 0xA0;
      if (b == 0xED) p.hi = 0x9F;
    } else if (b >= 0xF0 && b <= 0xF4) {
      p.due = 3;
      if (b == 0xF0) p.lo = 0x90;
      if (b == 0xF4) p.hi = 0x8F;
    } else {
      p.ok = false;
    }
    return p;
  }
};

}  // namespace

TokenTrie TokenTrie::of(const Tokenizer& tokenizer, const std::vector<std::string_view>& spelled) {
  std::vector<std::optional<std::string>> bytes(tokenizer.vocab_size());
  for (size_t id = 0; id < bytes.size(); ++id) {
    bytes[id] = tokenizer.token_bytes(int(id));
    if (!bytes[id] && !spelled.empty()) {
      const std::string piece = tokenizer.piece(int(id));
      if (std::find(spelled.begin(), spelled.end(), piece) != spelled.end()) bytes[id] = piece;
    }
  }
  return TokenTrie(bytes);
}

TokenTrie::TokenTrie(const std::vector<std::optional<std::string>>& token_bytes) : vocab_(token_bytes.size()) {
  bytes_.resize(vocab_);
  std::vector<std::pair<std::string_view, int>> sorted;
  for (size_t id = 0; id < token_bytes.size(); ++id)
    if (token_bytes[id] && !token_bytes[id]->empty()) {
      bytes_[id] = *token_bytes[id];
      sorted.emplace_back(bytes_[id], int(id));
    }
  std::sort(sorted.begin(), sorted.end());
  for (const auto& [bytes, id] : sorted) {
    tokens_.push_back(id);
    longest_ = std::max(longest_, bytes.size());
  }
  // Sorted strings give the trie in preorder: each string adds the nodes past its common
  // prefix with the previous one, and closes the previous one's deeper nodes.
  nodes_.push_back(Node{});
  std::vector<PlainPath> plain{PlainPath{}};
  std::vector<uint32_t> path{0};  // node at each depth of the current string
  auto close_to = [&](size_t depth, uint32_t token_index) {
    while (path.size() > depth + 1) {
      Node& n = nodes_[path.back()];
      n.end = uint32_t(nodes_.size());
      n.tokens_end = token_index;
      path.pop_back();
    }
  };
  std::string_view previous;
  for (uint32_t k = 0; k < sorted.size(); ++k) {
    const std::string_view s = sorted[k].first;
    size_t common = 0;
    while (common < s.size() && common < previous.size() && s[common] == previous[common]) ++common;
    close_to(common, k);
    for (size_t d = common + 1; d <= s.size(); ++d) {
      Node n;
      n.byte = uint8_t(s[d - 1]);
      n.depth = uint32_t(d);
      n.tokens_begin = n.tokens_here = k;
      plain.push_back(plain[path.back()].then(n.byte));
      path.push_back(uint32_t(nodes_.size()));
      nodes_.push_back(n);
    }
    nodes_[path.back()].tokens_here = k + 1;
    previous = s;
  }
  close_to(0, uint32_t(sorted.size()));
  nodes_[0].end = uint32_t(nodes_.size());
  nodes_[0].tokens_end = uint32_t(sorted.size());
  // Plain subtrees, children before parents (reverse preorder): a node's path is plain, its
  // own tokens end on a character boundary, and so are all its children's subtrees.
  std::vector<uint32_t> parent(nodes_.size(), 0);
  for (uint32_t i = 0; i < nodes_.size(); ++i)
    for (uint32_t c = i + 1; c < nodes_[i].end; c = nodes_[c].end) parent[c] = i;
  std::vector<uint8_t> subtree_plain(nodes_.size());
  std::vector<uint32_t> chars(nodes_.size(), 0);
  for (uint32_t i = 0; i < nodes_.size(); ++i) {
    const bool ends_here = nodes_[i].tokens_here > nodes_[i].tokens_begin;
    subtree_plain[i] = plain[i].ok && (!ends_here || plain[i].due == 0);
    if (ends_here) chars[i] = plain[i].chars;
  }
  for (uint32_t i = uint32_t(nodes_.size()); i-- > 1;) {
    subtree_plain[parent[i]] &= subtree_plain[i];
    chars[parent[i]] = std::max(chars[parent[i]], chars[i]);
  }
  for (uint32_t i = 1; i < nodes_.size(); ++i)
    if (subtree_plain[i]) nodes_[i].plain_chars = chars[i];
}

template <typename OnPlain, typename OnTokens>
void TokenTrie::walk(const JsonMatcher& state, bool plain_whole, const OnPlain& on_plain, const OnTokens& on_tokens) const {
  thread_local std::vector<JsonMatcher> states;
  states.assign(longest_ + 1, state);
  for (uint32_t i = 1; i < nodes_.size();) {
    const Node& n = nodes_[i];
    if (n.plain_chars != kNotPlain && plain_whole && state.takes_plain_text(n.plain_chars)) {
      on_plain(n);
      i = n.end;
      continue;
    }
    JsonMatcher& s = states[n.depth];
    s = states[n.depth - 1];
    if (!s.feed(n.byte)) {
      i = n.end;
      continue;
    }
    if (n.tokens_here > n.tokens_begin) on_tokens(n, s);
    ++i;
  }
}

int TokenTrie::closest_token(const JsonMatcher& state, JsonMatcher& after) const {
  // Plain text shortens the way to close only in a string still short of its minimum: its
  // subtrees are walked then, else skipped as they cannot beat what they stand beside.
  bool plain_helps = false;
  if (state.takes_plain_text(1)) {
    JsonMatcher probe = state;
    plain_helps = probe.feed(uint8_t('a')) && probe.bytes_to_close() < state.bytes_to_close();
  }
  size_t best_bytes = SIZE_MAX, best_depth = 0;
  int best = -1;
  walk(state, !plain_helps, [](const Node&) {}, [&](const Node& n, const JsonMatcher& s) {
    const size_t left = s.bytes_to_close();
    if (left < best_bytes || (left == best_bytes && n.depth > best_depth)) {
      best_bytes = left, best_depth = n.depth, best = tokens_[n.tokens_begin];
      after = s;
    }
  });
  return best;
}

size_t TokenTrie::tokens_to_close(const JsonMatcher& state, size_t limit, int* first) const {
  JsonMatcher at = state, next = state;
  if (first) *first = -1;
  for (size_t steps = 0; steps <= limit; ++steps) {
    if (at.closed()) return steps;
    if (steps == limit) break;
    const int token = closest_token(at, next);
    if (token < 0) break;
    if (steps == 0 && first) *first = token;
    at = next;
  }
  return SIZE_MAX;
}

void TokenTrie::allowed(const JsonMatcher& state, size_t tokens_left, std::vector<uint8_t>& allowed) const {
  allowed.assign(vocab_, 0);
  auto allow = [&](uint32_t from, uint32_t to) {
    for (uint32_t k = from; k < to; ++k) allowed[size_t(tokens_[k])] = 1;
  };
  // Plain text never lengthens the way to a closed value, so plain subtrees are taken whole
  // whenever the value can close from here.
  const bool plain_closes = state.bytes_to_close() <= tokens_left;
  walk(state, plain_closes, [&](const Node& n) { allow(n.tokens_begin, n.tokens_end); }, [&](const Node& n, const JsonMatcher& s) {
    if (s.bytes_to_close() <= tokens_left) allow(n.tokens_begin, n.tokens_here);
  });
  // Where bytes alone say the value cannot close in time, tokens may still: the first token
  // of a path that closes it within the tokens left after it.
  if (state.bytes_to_close() > tokens_left) {
    int first = -1;
    if (tokens_to_close(state, tokens_left + 1, &first) <= tokens_left + 1 && first >= 0) allowed[size_t(first)] = 1;
  }
}

}  // namespace larql
