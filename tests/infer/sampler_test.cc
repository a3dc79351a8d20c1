// Sampling: greedy picks the first maximum; a seed makes sampling repeat; a tiny top-p
// keeps only the most probable token; log-probabilities are the raw logits' log-softmax.
#include <gtest/gtest.h>

#include <cmath>
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

TEST(Sampler, LogprobsAreTheRawLogSoftmaxLessWhatTopPRemoves) {
  const auto l = logits();
  double z = 0;
  for (float v : l) z += std::exp(double(v));
  auto expected = [&](int id) { return float(double(l[size_t(id)]) - std::log(z)); };
  // Greedy or sampled at any temperature: the same numbers (of the raw logits); ties in id order.
  for (const SamplerOptions& o : {SamplerOptions{}, SamplerOptions{.temperature = 0.5f}}) {
    const TokenLogprobs t = Sampler(o).logprobs(l, 6, 4);
    EXPECT_FLOAT_EQ(t.logprob, expected(6));
    ASSERT_EQ(t.top.size(), 4u);
    const int order[] = {1, 4, 2, 6};
    for (size_t i = 0; i < 4; ++i) {
      EXPECT_EQ(t.top[i].first, order[i]) << i;
      EXPECT_FLOAT_EQ(t.top[i].second, expected(order[i])) << i;
    }
  }
  // top-p 0.6 at T=1 keeps tokens 1, 4 and 2: the 4th most likely (6) is left out of the top.
  const TokenLogprobs cut = Sampler({.temperature = 1.0f, .top_p = 0.6f}).logprobs(l, 2, 4);
  ASSERT_EQ(cut.top.size(), 3u);
  EXPECT_EQ(cut.top[2].first, 2);
  EXPECT_TRUE(Sampler({}).logprobs(l, 1, 0).top.empty());
  // Structured output's mask: masked tokens are left out of the top, the values stay the raw
  // log-softmax, and the filters cut what the mask left (top-k 1 keeps the best allowed one).
  std::vector<uint8_t> allowed(l.size(), 1);
  allowed[1] = allowed[4] = 0;
  const TokenLogprobs masked = Sampler({}).logprobs(l, 2, 2, allowed);
  ASSERT_EQ(masked.top.size(), 2u);
  EXPECT_EQ(masked.top[0].first, 2);
  EXPECT_EQ(masked.top[1].first, 6);
  EXPECT_FLOAT_EQ(masked.top[0].second, expected(2));
  const TokenLogprobs masked_k = Sampler({.temperature = 1.0f, .top_k = 1}).logprobs(l, 2, 3, allowed);
  ASSERT_EQ(masked_k.top.size(), 1u);
  EXPECT_EQ(masked_k.top[0].first, 2);
}

TEST(Sampler, TopKAndMinPCutTheTail) {
  // top-k 2 keeps the two most probable (1 and 4, tied at 2.0).
  for (int id : draw({.temperature = 1.5f, .seed = 2, .top_k = 2}, 200)) EXPECT_TRUE(id == 1 || id == 4) << id;
  // min-p 0.5 at T=1 keeps the tokens within e^(l − 2) ≥ 0.5 of the top: 1, 4, 2 (0.90) and 6 (0.61).
  std::set<int> seen;
  for (int id : draw({.temperature = 1.0f, .seed = 3, .min_p = 0.5f}, 400)) seen.insert(id);
  EXPECT_EQ(seen, (std::set<int>{1, 2, 4, 6}));
  std::vector<float> probs;
  Sampler({.temperature = 1.0f, .min_p = 0.5f}).distribution(logits(), probs);
  float total = 0;
  for (float p : probs) total += p;
  EXPECT_NEAR(total, 1.0f, 1e-6f);
  EXPECT_EQ(probs[5], 0.0f) << "e^(0.5 − 2) ≈ 0.22 of the top: cut";
}

TEST(Sampler, BiasAndPenaltiesShapeTheLogitsBeforeChoosing) {
  // A bias of +10 on token 7 makes it greedy's choice.
  auto l = logits();
  EXPECT_EQ(Sampler({.logit_bias = {{7, 10.0f}}}).sample(l), 7);
  // A repetition penalty of 2 on the prompt's tokens 1 and 4 (logits 2.0 → 1.0): 2 (1.9) wins.
  Sampler repeat({.repetition_penalty = 2.0f});
  repeat.remember_prompt(std::vector<int>{1, 4});
  l = logits();
  EXPECT_EQ(repeat.sample(l), 2);
  // Presence 0.05 and frequency 0.1 on generated tokens: 1 generated once (2.0 − 0.15) loses to 4.
  Sampler penalised({.presence_penalty = 0.05f, .frequency_penalty = 0.1f});
  penalised.remember_prompt(std::vector<int>{4});  // the prompt does not count for these
  penalised.remember(1);
  l = logits();
  EXPECT_EQ(penalised.sample(l), 4);
  // The distribution speculative decoding and logprobs' filter read sees the same shaping.
  std::vector<float> probs;
  penalised.distribution(logits(), probs);
  EXPECT_EQ(probs[4], 1.0f);
}

}  // namespace
}  // namespace larql
