// Sampling: greedy picks the first maximum; a seed makes sampling repeat; a tiny top-p
// keeps only the most probable token.
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "infer/sampler.h"

namespace larql {
namespace {

std::vector<float> logits() { return {0.1f, 2.0f, 1.9f, -1.0f, 2.0f, 0.5f, 1.5f, 0.0f}; }

std::vector<int> draw(SamplerOptions options, int n) {
  Sampler s(options);
  std::vector<int> out;
  for (int i = 0; i < n; ++i) {
    auto l = logits();
    out.push_back(s.sample(l));
  }
  return out;
}

TEST(Sampler, GreedyTakesTheFirstMaximum) {
  auto l = logits();
  EXPECT_EQ(Sampler({}).sample(l), 1);
}

TEST(Sampler, SeedMakesSamplingRepeat) {
  const SamplerOptions a{.temperature = 1.0f, .top_p = 1.0f, .seed = 42};
  EXPECT_EQ(draw(a, 50), draw(a, 50));
  const auto different = draw({.temperature = 1.0f, .top_p = 1.0f, .seed = 43}, 50);
  EXPECT_NE(draw(a, 50), different);
  EXPECT_GT(std::set<int>(different.begin(), different.end()).size(), 3u);  // it does sample
}

TEST(Sampler, TinyTopPKeepsTheMostProbableToken) {
  for (int id : draw({.temperature = 0.7f, .top_p = 0.01f, .seed = 1}, 30)) EXPECT_TRUE(id == 1 || id == 4);
  // top-p 0.6 over these logits at T=1 keeps tokens 1, 4 and 2 only.
  for (int id : draw({.temperature = 1.0f, .top_p = 0.6f, .seed = 5}, 200)) EXPECT_TRUE(id == 1 || id == 4 || id == 2) << id;
}

}  // namespace
}  // namespace larql
