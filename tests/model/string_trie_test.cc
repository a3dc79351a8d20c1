// The longest of a set of strings at a position (model/string_trie.h), against the scan it
// replaced: every string tried, longest first, the first added winning among equals.
#include "model/string_trie.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

namespace larql {
namespace {

TEST(StringTrie, TheLongestStringAtAPositionWins) {
  StringTrie trie;
  trie.add("<a", 0);
  trie.add("<ab>", 1);
  trie.add("<ab", 2);
  trie.add("<ab>", 3);  // a second time: keeps 1
  EXPECT_EQ(trie.longest_at("x<ab>y", 1), 1);
  EXPECT_EQ(trie.longest_at("x<ab", 1), 2) << "the text ends inside <ab>";
  EXPECT_EQ(trie.longest_at("<ac", 0), 0);
  EXPECT_EQ(trie.longest_at("<ac", 1), -1);
  EXPECT_EQ(trie.longest_at("", 0), -1);
}

TEST(StringTrie, AgreesWithTryingEveryStringOnRandomText) {
  std::mt19937 rng(3);
  auto random_text = [&](size_t n) {
    std::string s;
    for (size_t i = 0; i < n; ++i) s += "<>ab\xc3"[rng() % 5];
    return s;
  };
  std::vector<std::string> strings;
  for (int i = 0; i < 40; ++i) strings.push_back(random_text(1 + rng() % 5));
  std::stable_sort(strings.begin(), strings.end(), [](const auto& a, const auto& b) { return a.size() > b.size(); });
  StringTrie trie;
  for (size_t i = 0; i < strings.size(); ++i) trie.add(strings[i], int(i));
  for (int round = 0; round < 200; ++round) {
    const std::string text = random_text(rng() % 40);
    for (size_t at = 0; at <= text.size(); ++at) {
      int scanned = -1;
      for (size_t i = 0; i < strings.size() && scanned < 0; ++i)
        if (text.compare(at, strings[i].size(), strings[i]) == 0) scanned = int(i);
      ASSERT_EQ(trie.longest_at(text, at), scanned) << "text '" << text << "' at " << at;
    }
  }
}

}  // namespace
}  // namespace larql
