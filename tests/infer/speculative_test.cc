// Speculative decoding (generate.h): prompt-lookup drafts, and greedy output identical to
// one token at a time, whatever the drafts (right, wrong by construction, none), with the
// draft length following the acceptance down to none.
#include <gtest/gtest.h>

#include "infer/generate.h"
#include "infer/local_ffn.h"
#include "infer/lookup_draft.h"
#include "model/loader.h"
#include "model/synth.h"

namespace larql {
namespace {

TEST(LookupDraft, ProposesWhatFollowedTheMostRecentLongestMatchOfTheTail) {
  const std::vector<int> text{5, 6, 7, 8, 1, 5, 6, 9, 2, 5, 6};
  // Tail "5 6" (up to 3 tokens: "2 5 6" never occurred before): its latest earlier match is
  // at 5, followed by 9 2 5 6.
  EXPECT_EQ(lookup_draft(text, 3), (std::vector<int>{9, 2, 5}));
  EXPECT_EQ(lookup_draft(text, 10), (std::vector<int>{9, 2, 5, 6}));
  // A longer tail wins over a more recent shorter one.
  const std::vector<int> longer{1, 2, 3, 4, 9, 3, 7, 1, 2, 3};
  EXPECT_EQ(lookup_draft(longer, 2), (std::vector<int>{4, 9}));
  EXPECT_EQ(lookup_draft(longer, 2, {.max_ngram = 1}), (std::vector<int>{7, 1}));  // "3" last followed by 7
  EXPECT_TRUE(lookup_draft(std::vector<int>{1, 2, 3, 4}, 4).empty());            // nothing repeats
  EXPECT_TRUE(lookup_draft(text, 0).empty());
  EXPECT_TRUE(lookup_draft(std::vector<int>{7}, 3).empty());
}

class Speculative : public ::testing::Test {
 protected:
  void SetUp() override {
    auto m = load_model(LARQL_SOURCE_DIR "/models/demo");
    ASSERT_TRUE(m.ok()) << m.error().message;
    model_ = std::make_unique<Model>(std::move(*m));
  }
  GenerateResult run(const std::vector<int>& prompt, size_t steps, std::optional<SpeculativeOptions> spec) {
    ThreadPool pool(2);
    LocalFfn ffn(*model_, pool);
    Transformer t(*model_, ffn, pool);
    auto r = generate(t, prompt, {.max_new_tokens = steps, .ignore_eos = true, .sampler = {}, .speculative = spec});
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
    return r.ok() ? *r : GenerateResult{};
  }
  std::unique_ptr<Model> model_;
};

TEST_F(Speculative, LookupDraftsGiveTheGreedyTokensInFewerPasses) {
  for (const std::vector<int> prompt : {std::vector<int>{0, 1135, 260, 2079}, std::vector<int>{0, 1450, 13, 2127, 397}}) {
    const GenerateResult plain = run(prompt, 120, std::nullopt);
    for (size_t max_draft : {1, 4, 8}) {
      const GenerateResult spec = run(prompt, 120, SpeculativeOptions{.max_draft = max_draft});
      EXPECT_EQ(spec.generated, plain.generated) << "max_draft " << max_draft;
      EXPECT_GT(spec.accepted, 0u) << "the demo model repeats itself; lookup should guess some";
      // Each kept draft saves one pass (one more when the last pass ends on a kept draft).
      EXPECT_GE(spec.passes + spec.accepted, plain.passes);
      EXPECT_LE(spec.passes + spec.accepted, plain.passes + 1);
    }
  }
}

TEST_F(Speculative, DraftsWrongByConstructionAreNeverKeptAndFallToNone) {
  const std::vector<int> prompt{0, 1135, 260, 2079};
  const GenerateResult plain = run(prompt, 128, std::nullopt);
  std::vector<int> truth = prompt;
  truth.insert(truth.end(), plain.generated.begin(), plain.generated.end());
  const int V = int(model_->config.vocab);
  SpeculativeOptions wrong;
  // Each draft token is one past the true next one: never what greedy decoding picks.
  wrong.draft = [&](std::span<const int> context, size_t k) {
    std::vector<int> out;
    for (size_t i = 0; i < k && context.size() + i < truth.size(); ++i) out.push_back((truth[context.size() + i] + 1) % V);
    return out;
  };
  const GenerateResult spec = run(prompt, 128, wrong);
  EXPECT_EQ(spec.generated, plain.generated);
  EXPECT_EQ(spec.accepted, 0u);
  // 8, 7, ..., 1 drafted before the length reaches none, then one probe every 16 tokens.
  EXPECT_LE(spec.drafted, 8u + 7 + 6 + 5 + 4 + 3 + 2 + 1 + 128 / 16);
  EXPECT_EQ(spec.passes, plain.passes);
}

TEST_F(Speculative, StopsAtTheStepsAndTheEndTokenAsGreedyDoes) {
  const std::vector<int> prompt{0, 1135, 260, 2079};
  for (size_t steps : {1, 2, 7, 33}) {
    const GenerateResult plain = run(prompt, steps, std::nullopt), spec = run(prompt, steps, SpeculativeOptions{});
    EXPECT_EQ(spec.generated, plain.generated) << steps;
  }
  // With end tokens honoured, the same stop at the same place.
  ThreadPool pool(2);
  LocalFfn ffn(*model_, pool);
  Transformer a(*model_, ffn, pool), b(*model_, ffn, pool);
  auto plain = generate(a, prompt, {.max_new_tokens = 300});
  auto spec = generate(b, prompt, {.max_new_tokens = 300, .speculative = SpeculativeOptions{}});
  ASSERT_TRUE(plain.ok() && spec.ok());
  EXPECT_EQ(spec->generated, plain->generated);
  EXPECT_EQ(spec->stop, plain->stop);
  // Sampling is not speculated yet: refused, naming the flag.
  Transformer c(*model_, ffn, pool);
  auto sampled = generate(c, prompt, {.max_new_tokens = 4, .sampler = {.temperature = 0.7f}, .speculative = SpeculativeOptions{}});
  ASSERT_FALSE(sampled.ok());
  EXPECT_NE(sampled.error().message.find("--temperature 0"), std::string::npos);
}

}  // namespace
}  // namespace larql
