// Stop strings are found in the decoded text however the tokens split them, the text
// before them is emitted and nothing after; text that only might start one is held, then
// released when it turns out not to.
#include <gtest/gtest.h>

#include "api/stop_strings.h"

namespace larql {
namespace {

std::string feed(StopStrings& s, const std::vector<std::string>& pieces) {
  std::string out;
  for (const auto& p : pieces) out += s.push(p);
  return out + s.finish();
}

TEST(StopStrings, FoundAcrossPiecesAndNotEmitted) {
  StopStrings s({"\n\nQ:"});
  EXPECT_EQ(feed(s, {"The answer", " is 4.\n", "\nQ", ": next", " question"}), "The answer is 4.");
  EXPECT_TRUE(s.stopped());
}

TEST(StopStrings, HeldTextIsReleasedWhenItIsNotAStop) {
  StopStrings s({"END"});
  EXPECT_EQ(s.push("the EN"), "the ") << "'EN' may begin END: held";
  EXPECT_EQ(s.push("D"), "");
  EXPECT_TRUE(s.stopped());
  StopStrings t({"END"});
  EXPECT_EQ(t.push("the EN"), "the ");
  EXPECT_EQ(t.push("TRY"), "ENTRY");
  EXPECT_EQ(t.finish(), "");
  EXPECT_FALSE(t.stopped());
}

TEST(StopStrings, TheEarliestOfSeveralWinsAndNoStopsPassEverything) {
  StopStrings s({"world", "lo"});
  EXPECT_EQ(feed(s, {"hello world"}), "hel");
  StopStrings none({});
  EXPECT_EQ(feed(none, {"a", "b", ""}), "ab");
  StopStrings empty({""});
  EXPECT_EQ(feed(empty, {"a", "b"}), "ab") << "an empty stop string stops nothing";
}

}  // namespace
}  // namespace larql
