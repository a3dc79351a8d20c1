// The PCRE2 wrapper the pre-tokenisers split text with: its matches, what it does with
// invalid UTF-8, and that splitting takes time in proportion to the text.
#include "model/regex.h"

#include <gtest/gtest.h>

#include "support/best_time.h"

namespace larql {
namespace {

std::shared_ptr<Regex> words() {
  auto re = Regex::compile(R"( ?\p{L}+|\s+)");
  EXPECT_TRUE(re.ok());
  return *re;
}

TEST(Regex, FindsNonOverlappingMatchesAsByteRanges) {
  using Ranges = std::vector<std::pair<size_t, size_t>>;
  // "ö" is two bytes; at the two spaces " ?\p{L}+" fails, so \s+ takes both.
  EXPECT_EQ(words()->find_all("Hello wörld  x"), (Ranges{{0, 5}, {5, 12}, {12, 14}, {14, 15}}));
  EXPECT_TRUE(words()->find_all("").empty());
}

TEST(Regex, ASubjectWithInvalidUtf8AnywhereHasNoMatches) {
  EXPECT_TRUE(words()->find_all("abc def ghi \xff").empty());
  EXPECT_TRUE(words()->find_all("\xc3 abc").empty());
}

// Sixteen times the text must take well under 64 times as long: PCRE2 checked the UTF-8
// of the rest of the subject at every match, which made 640 KB of words take 37 s to
// tokenize (256 times as long for 16 times the text). Linear work measures 16-26 times
// under ASan, whose fresh pages cost more for the larger result. Best of five, same run.
TEST(Regex, SplittingTimeGrowsLinearlyWithTheText) {
  const auto re = words();
  auto best_seconds = [&](size_t chars) {
    std::string text;
    for (size_t i = 0; text.size() < chars; ++i) text += i % 2 ? " cat" : " sat on";
    return test::best_of_five_seconds([&] { EXPECT_GT(re->find_all(text).size(), chars / 8); });
  };
  const double small = best_seconds(64000), large = best_seconds(1024000);
  EXPECT_LT(large, 64 * small) << "64000 chars " << small << " s, 1024000 chars " << large << " s";
}

}  // namespace
}  // namespace larql
