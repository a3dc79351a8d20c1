// Which of a set of strings is the longest to start at a position of a text, in time
// proportional to that string's length, however many strings there are: a tokenizer's
// added tokens (Gemma's files list thousands) are looked for at every byte of a prompt.
#pragma once

#include <cstdint>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace larql {

class StringTrie {
 public:
  // Adds `s` (non-empty) with `value`; a string added twice keeps its first value.
  void add(std::string_view s, int value) {
    uint32_t node = 0;
    for (unsigned char c : s) {
      auto [edge, inserted] = edges_.try_emplace(key(node, c), uint32_t(values_.size()));
      if (inserted) values_.push_back(kNone);
      node = edge->second;
    }
    if (values_[node] == kNone) values_[node] = value;
  }

  // The value of the longest added string that `text` has at `at`, or -1.
  int longest_at(std::string_view text, size_t at) const {
    int found = kNone;
    uint32_t node = 0;
    for (size_t i = at; i < text.size(); ++i) {
      const auto edge = edges_.find(key(node, static_cast<unsigned char>(text[i])));
      if (edge == edges_.end()) break;
      node = edge->second;
      if (values_[node] != kNone) found = values_[node];
    }
    return found;
  }

 private:
  static constexpr int kNone = -1;
  static uint64_t key(uint32_t node, unsigned char c) { return uint64_t{node} << 8 | c; }
  std::unordered_map<uint64_t, uint32_t> edges_;  // (node, byte) -> child
  std::vector<int> values_{kNone};                // per node; node 0 is the empty string
};

}  // namespace larql
