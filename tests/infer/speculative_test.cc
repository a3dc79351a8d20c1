// Speculative decoding (generate.h): prompt-lookup drafts, and greedy output identical to
// one token at a time, whatever the drafts (right, wrong by construction, none), with the
// draft length following the acceptance down to none; sampled output distributed as plain
// sampling's (chi-squared, fixed seeds).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "infer/draft_tree.h"
#include "infer/generate.h"
#include "infer/local_ffn.h"
#include "infer/lookup_draft.h"
#include "infer/model_draft.h"
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

// Several continuations: the longest tail's occurrences first, the most recent first, then
// a shorter tail's; none a prefix of an earlier one.
TEST(LookupDraft, OffersDistinctContinuationsForATree) {
  const std::vector<int> text{5, 6, 7, 8, 1, 5, 6, 9, 2, 7, 5, 6, 9, 4, 3, 6};
  // Tail "6" (no longer tail occurred before): what followed the 6 at 11, at 6 and at 1.
  EXPECT_EQ(lookup_drafts(text, 2, {.max_ngram = 3, .branches = 4}),
            (std::vector<std::vector<int>>{{9, 4}, {9, 2}, {7, 8}}));
  EXPECT_EQ(lookup_drafts(text, 1, {.max_ngram = 3, .branches = 4}), (std::vector<std::vector<int>>{{9}, {7}}))
      << "a continuation that an earlier one starts with adds nothing";
  EXPECT_EQ(lookup_drafts(text, 2, {.max_ngram = 3, .branches = 1}).front(), lookup_draft(text, 2));
  const std::vector<int> longer{1, 2, 3, 4, 9, 3, 7, 1, 2, 3};
  EXPECT_EQ(lookup_drafts(longer, 2, {.max_ngram = 3, .branches = 3}),
            (std::vector<std::vector<int>>{{4, 9}, {7, 1}}))
      << "the tail 1 2 3's continuation, then 3's other one";
  EXPECT_TRUE(lookup_drafts(longer, 2, {.max_ngram = 3, .branches = 0}).empty());
  EXPECT_EQ(lookup_match_length(longer, 3), 3u);
  EXPECT_EQ(lookup_match_length(longer, 2), 2u);
  EXPECT_EQ(lookup_match_length(text, 3), 1u);
  EXPECT_EQ(lookup_match_length(std::vector<int>{1, 2, 3, 4}, 3), 0u);
}

TEST(DraftTree, SharesPrefixesKeepsTheDraftsOrderAndStopsAtTheRows) {
  const std::vector<std::vector<int>> drafts{{4, 5, 6}, {4, 5, 7}, {8}, {4, 9}};
  const DraftTree tree = DraftTree::build(1, drafts, 100);
  EXPECT_EQ(tree.tokens, (std::vector<int>{1, 4, 5, 6, 7, 8, 9}));
  EXPECT_EQ(tree.parents, (std::vector<int>{-1, 0, 1, 2, 2, 0, 1}));
  EXPECT_EQ(tree.children(0), (std::vector<size_t>{1, 5}));
  EXPECT_EQ(tree.children(2), (std::vector<size_t>{3, 4}));
  EXPECT_TRUE(tree.children(3).empty());
  EXPECT_EQ(tree.drafted(), 6u);
  const DraftTree cut = DraftTree::build(1, drafts, 4);
  EXPECT_EQ(cut.tokens, (std::vector<int>{1, 4, 5, 6}));
  EXPECT_EQ(DraftTree::build(1, drafts, 1).tokens, (std::vector<int>{1}));
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
  for (const std::vector<int>& prompt : {std::vector<int>{0, 1135, 260, 2079}, std::vector<int>{0, 1450, 13, 2127, 397}}) {
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

// A pass over a tree of drafts after `prompt`: each row's logits are those of its path fed
// alone after the cache, bit for bit; and once keep_path has moved the entries of the path
// to `kept_row` (off the first branch), the cache is the one that path alone leaves.
void expect_tree_rows_are_their_paths(const Model& model, const std::vector<int>& prompt, const DraftTree& tree, size_t kept_row) {
  ThreadPool pool(2);
  LocalFfn ffn(model, pool);
  Transformer t(model, ffn, pool);
  std::vector<float> logits, tree_logits, path_logits;
  ASSERT_TRUE(t.forward(prompt, 0, logits).ok());
  const size_t pos = prompt.size(), V = model.config.vocab;
  ASSERT_TRUE(t.forward_tree(tree.tokens, tree.parents, pos, tree_logits).ok());
  ASSERT_EQ(tree_logits.size(), tree.tokens.size() * V);
  auto path_to = [&](size_t row) {
    std::vector<size_t> rows;
    for (int r = int(row); r >= 0; r = tree.parents[size_t(r)]) rows.insert(rows.begin(), size_t(r));
    return rows;
  };
  auto alone = [&](const std::vector<size_t>& rows, std::vector<int> then) {
    std::vector<int> fed = prompt;
    for (size_t r : rows) fed.push_back(tree.tokens[r]);
    fed.insert(fed.end(), then.begin(), then.end());
    Transformer u(model, ffn, pool);
    EXPECT_TRUE(u.forward(fed, 0, path_logits).ok());
    return path_logits;
  };
  for (size_t row = 0; row < tree.tokens.size(); ++row) {
    const std::vector<float> expected = alone(path_to(row), {});
    EXPECT_TRUE(std::equal(expected.begin(), expected.end(), tree_logits.begin() + long(row * V))) << "row " << row;
  }
  const std::vector<size_t> kept = path_to(kept_row);
  ASSERT_NE(kept.back(), kept.size() - 1) << "the kept path should be off the first branch";
  t.keep_path(kept, pos);
  const int after[] = {7};
  ASSERT_TRUE(t.forward(after, pos + kept.size(), logits).ok());
  EXPECT_EQ(logits, alone(kept, {7}));
}

TEST_F(Speculative, ATreePassGivesEachRowItsPathsLogitsBitForBit) {
  const std::vector<std::vector<int>> drafts{{300, 301, 302}, {300, 305}, {310, 311}, {300, 301, 309}};
  const DraftTree tree = DraftTree::build(42, drafts, 100);
  ASSERT_EQ(tree.tokens, (std::vector<int>{42, 300, 301, 302, 305, 310, 311, 309}));
  expect_tree_rows_are_their_paths(*model_, {0, 1135, 260, 2079, 13}, tree, 7);  // 42 300 301 309

  ThreadPool pool(1);
  LocalFfn ffn(*model_, pool);
  Transformer t(*model_, ffn, pool);
  std::vector<float> logits;
  const int bad_first[] = {0, 0}, bad_later[] = {-1, 1};
  const int two[] = {5, 6};
  for (auto parents : {std::span<const int>(bad_first), std::span<const int>(bad_later), std::span<const int>(bad_later, 1)}) {
    const auto s = t.forward_tree(two, parents, 0, logits);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.error().message.find("tree of drafts"), std::string::npos) << s.error().message;
  }
}

// The same on the Gemma 4 E-model fixture: sliding layers of a window of 4 keys, shorter
// than the tree's deepest paths, layers that read an earlier layer's cache, and per-layer
// embeddings.
TEST(SpeculativeTree, ATreePassOnSlidingAndSharedKvLayersGivesEachRowItsPathsLogits) {
  auto model = load_model(LARQL_SOURCE_DIR "/tests/data/gemma/gemma4e");
  ASSERT_TRUE(model.ok()) << model.error().message;
  ASSERT_EQ(model->config.layer(0).window, 4u);
  const std::vector<std::vector<int>> drafts{{10, 11, 12, 13, 14, 15}, {10, 11, 20, 21, 22}, {30, 31}, {10, 40}};
  const DraftTree tree = DraftTree::build(42, drafts, 100);
  expect_tree_rows_are_their_paths(*model, {2, 100, 101, 102, 103, 104}, tree, 9);  // 42 10 11 20 21 22
}

// Trees of lookup continuations keep the plain greedy ids and take fewer passes than chains.
TEST_F(Speculative, LookupTreesGiveTheGreedyTokensInFewerPassesThanChains) {
  size_t chain_passes = 0, tree_passes = 0;
  for (const std::vector<int>& prompt : {std::vector<int>{0, 1135, 260, 2079}, std::vector<int>{0, 1450, 13, 2127, 397}}) {
    const GenerateResult plain = run(prompt, 120, std::nullopt);
    const GenerateResult chain = run(prompt, 120, SpeculativeOptions{.max_draft = 16});
    const GenerateResult tree = run(prompt, 120, SpeculativeOptions{.max_draft = 16, .branches = 4});
    EXPECT_EQ(chain.generated, plain.generated);
    EXPECT_EQ(tree.generated, plain.generated);
    EXPECT_LE(tree.passes + tree.accepted, plain.passes + 1);
    EXPECT_GE(tree.passes + tree.accepted, plain.passes);
    chain_passes += chain.passes, tree_passes += tree.passes;
  }
  EXPECT_LT(tree_passes, chain_passes);
}

// A prompt whose first lookup drafts all miss: the length falls to none, and without the
// repeats rule (drafts again when the tail matches two tokens or more) it stayed there,
// its probes missing ever further apart (127 passes for 127 tokens).
TEST_F(Speculative, TextThatRepeatsIsDraftedAfterTheLengthFellToNone) {
  const std::vector<int> prompt{0, 3517, 461, 1202, 2964, 28, 538, 569};  // "God hath spoken once; twice"
  const GenerateResult plain = run(prompt, 128, std::nullopt);
  const GenerateResult spec = run(prompt, 128, SpeculativeOptions{});
  EXPECT_EQ(spec.generated, plain.generated);
  EXPECT_LT(spec.passes, plain.passes * 3 / 4) << spec.accepted << " of " << spec.drafted << " drafts kept";
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
  // 4, 2 and 1 drafted before the length reaches none, then probes after 16, 32 and 64
  // more tokens.
  EXPECT_EQ(spec.drafted, 4u + 2 + 1 + 3);
  EXPECT_EQ(spec.passes, plain.passes);
}

// The adaptive length's rule on its own: half of max_draft at first, halved by each miss
// until a draft is kept; then max_draft after a hit and one fewer after each miss down to
// none; from none, probes whose wait doubles while they miss (up to 16 times probe_every)
// and comes back after a hit.
TEST(DraftLength, StartsAtHalfFallsToNoneAndProbesLessOftenWhileTheProbesMiss) {
  const SpeculativeOptions options{.max_draft = 4, .probe_every = 2};
  DraftLength length(options);
  for (size_t k : {2, 1}) {
    EXPECT_EQ(length.wanted(), k);
    length.after(k, 0);
  }
  // Sweeps of no draft until each probe; a sweep without a draft tells nothing.
  auto sweeps_to_probe = [&] {
    size_t n = 1;
    for (; length.wanted() == 0 && n < 100; ++n) length.after(0, 0);
    return n;
  };
  for (size_t wait : {2, 4, 8, 16, 32, 32}) {
    EXPECT_EQ(sweeps_to_probe(), wait);
    length.after(1, 0);
  }
  EXPECT_EQ(sweeps_to_probe(), 32u);
  length.after(1, 1);
  for (size_t k : {4, 3, 2, 1}) {
    EXPECT_EQ(length.wanted(), k) << "a kept probe brings back max_draft; misses then take one each";
    length.after(k, 0);
  }
  EXPECT_EQ(sweeps_to_probe(), 2u) << "and the probes' first wait";
  for (size_t k : {4, 3, 2, 1}) length.after(k, 0);
  EXPECT_TRUE(length.stopped());
  EXPECT_EQ(length.wanted(true), 2u) << "text that repeats gets half of max_draft, probe or not";
  length.after(2, 1);
  EXPECT_EQ(length.wanted(), 4u);

  const SpeculativeOptions fixed{.max_draft = 3, .adaptive = false};
  DraftLength constant(fixed);
  EXPECT_EQ(constant.wanted(), 3u);
  constant.after(3, 0);
  EXPECT_EQ(constant.wanted(), 3u);
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
  // Sampled, the same seed gives the same tokens, and lookup drafts are kept at times.
  auto sampled = [&](uint64_t seed) {
    Transformer c(*model_, ffn, pool);
    auto r = generate(c, prompt, {.max_new_tokens = 64, .ignore_eos = true, .sampler = {.temperature = 0.3f, .seed = seed},
                                  .speculative = SpeculativeOptions{}});
    EXPECT_TRUE(r.ok());
    return r.ok() ? *r : GenerateResult{};
  };
  const GenerateResult one = sampled(7), again = sampled(7);
  EXPECT_EQ(one.generated, again.generated);
  EXPECT_EQ(one.generated.size(), 64u);
  EXPECT_GT(one.accepted, 0u);
}

// The chi-squared statistic of counts against expected counts, bins merged (in order of
// expectation) until each expects at least 5; and the 0.1% critical value for its degrees
// of freedom (Wilson-Hilferty).
std::pair<double, double> chi_squared(std::vector<std::pair<double, double>> expected_observed) {
  std::sort(expected_observed.begin(), expected_observed.end());
  double chi = 0, e = 0, o = 0;
  size_t bins = 0;
  for (size_t i = 0; i < expected_observed.size(); ++i) {
    e += expected_observed[i].first, o += expected_observed[i].second;
    if (e >= 5 || i + 1 == expected_observed.size()) {
      chi += (o - e) * (o - e) / e;
      ++bins;
      e = o = 0;
    }
  }
  const double df = double(bins - 1), z = 3.09;
  const double critical = df * std::pow(1 - 2 / (9 * df) + z * std::sqrt(2 / (9 * df)), 3);
  return {chi, critical};
}

// Speculative sampling's rule (Sampler::verify, one draft): whether the draft is the likeliest token,
// an unlikely one or one of probability 0, the token returned is distributed as the target.
TEST(SpeculativeSampling, VerifiedTokensAreDistributedAsTheTarget) {
  std::vector<float> probs{0.30f, 0.20f, 0.15f, 0.10f, 0.08f, 0.06f, 0.05f, 0.03f, 0.02f, 0.01f, 0.0f, 0.0f};
  const size_t trials = 20000;
  for (int drafted : {0, 6, 9, 11}) {
    Sampler sampler({.temperature = 1.0f, .seed = uint64_t(100 + drafted)});
    std::vector<double> counts(probs.size(), 0);
    size_t kept = 0;
    for (size_t t = 0; t < trials; ++t) {
      const int draft[] = {drafted};
      const auto [token, which] = sampler.verify(probs, draft);
      const bool is_draft = which == 0;
      counts[size_t(token)] += 1;
      kept += is_draft;
    }
    std::vector<std::pair<double, double>> bins;
    for (size_t i = 0; i < probs.size(); ++i) {
      if (probs[i] == 0) EXPECT_EQ(counts[i], 0) << "a token of probability 0 came out";
      else bins.push_back({probs[i] * double(trials), counts[i]});
    }
    const auto [chi, critical] = chi_squared(bins);
    EXPECT_LT(chi, critical) << "draft " << drafted;
    EXPECT_NEAR(double(kept) / trials, probs[size_t(drafted)], 0.01) << "kept with its probability";
  }
}

// The rule over several drafts (Sampler::verify, a tree's branches from one node): the
// token is distributed as the target whichever drafts are offered, each draft kept with
// its own probability.
TEST(SpeculativeSampling, TokensVerifiedAgainstSeveralDraftsAreDistributedAsTheTarget) {
  std::vector<float> probs{0.30f, 0.20f, 0.15f, 0.10f, 0.08f, 0.06f, 0.05f, 0.03f, 0.02f, 0.01f, 0.0f, 0.0f};
  const size_t trials = 20000;
  for (const std::vector<int>& drafted : {std::vector<int>{0, 1}, {6, 0, 9}, {11, 3}, {1, 2, 3, 4, 5}}) {
    Sampler sampler({.temperature = 1.0f, .seed = uint64_t(200 + drafted.front())});
    std::vector<double> counts(probs.size(), 0), kept(drafted.size(), 0);
    for (size_t t = 0; t < trials; ++t) {
      const auto [token, which] = sampler.verify(probs, drafted);
      counts[size_t(token)] += 1;
      if (which >= 0) {
        EXPECT_EQ(token, drafted[size_t(which)]);
        kept[size_t(which)] += 1;
      }
    }
    std::vector<std::pair<double, double>> bins;
    for (size_t i = 0; i < probs.size(); ++i) {
      if (probs[i] == 0) EXPECT_EQ(counts[i], 0) << "a token of probability 0 came out";
      else bins.push_back({probs[i] * double(trials), counts[i]});
    }
    const auto [chi, critical] = chi_squared(bins);
    EXPECT_LT(chi, critical) << "drafts from " << drafted.front();
    for (size_t i = 0; i < drafted.size(); ++i)
      EXPECT_NEAR(kept[i] / trials, probs[size_t(drafted[i])], 0.01) << "draft " << drafted[i] << " kept with its probability";
  }
}

// End to end on a tiny model: the second token, drafted by a fixed rule and verified, is
// distributed as plain sampling's second token, Σ p(t1) · p(t2 | t1) over the first token.
TEST(SpeculativeSampling, TheSecondTokenOfATinyModelIsDistributedAsPlainSamplings) {
  const std::string dir = ::testing::TempDir() + "larql_spec_tiny";
  ASSERT_TRUE(write_synthetic_checkpoint(dir, {.family = "llama", .hidden = 64, .layers = 2, .ffn = 128, .heads = 4, .kv_heads = 4,
                                               .vocab = 256, .context = 64, .dtype = DType::f32, .seed = 5})
                  .ok());
  auto model = load_model(dir);
  ASSERT_TRUE(model.ok()) << model.error().message;
  const SamplerOptions sampling{.temperature = 0.3f, .top_p = 0.9f};
  const std::vector<int> prompt{1, 2, 3};
  ThreadPool pool(1);
  LocalFfn ffn(*model, pool);
  const size_t V = model->config.vocab;
  // Expected: the first token's distribution, then each possible first token's second.
  std::vector<double> expected(V, 0);
  std::vector<int> likely(V, 0);  // after each first token: its likeliest second, the draft below
  std::vector<float> logits, first, second;
  Transformer t(*model, ffn, pool);
  ASSERT_TRUE(t.forward(prompt, 0, logits).ok());
  Sampler(sampling).distribution(logits, first);
  for (size_t t1 = 0; t1 < V; ++t1) {
    if (first[t1] == 0) continue;
    std::vector<int> two = prompt;
    two.push_back(int(t1));
    Transformer u(*model, ffn, pool);
    ASSERT_TRUE(u.forward(two, 0, logits).ok());
    Sampler(sampling).distribution(logits, second);
    for (size_t t2 = 0; t2 < V; ++t2) expected[t2] += double(first[t1]) * second[t2];
    likely[t1] = argmax(second);
  }
  SpeculativeOptions spec{.max_draft = 1, .adaptive = false};
  // The draft: in even trials the likeliest second token (kept often), in odd ones a fixed
  // unlikely rule (replaced often), so that both of the rule's branches are exercised.
  bool draft_likely = true;
  spec.draft = [&](std::span<const int> context, size_t k) {
    const int t1 = context.back();
    return std::vector<int>(std::min<size_t>(k, 1), draft_likely ? likely[size_t(t1)] : (t1 * 7 + 3) % int(V));
  };
  const size_t trials = 3000;
  std::vector<double> counts(V, 0);
  size_t kept = 0;
  for (size_t i = 0; i < trials; ++i) {
    SamplerOptions seeded = sampling;
    seeded.seed = 1000 + i;
    draft_likely = i % 2 == 0;
    Transformer g(*model, ffn, pool);
    auto r = generate(g, prompt, {.max_new_tokens = 2, .ignore_eos = true, .sampler = seeded, .speculative = spec});
    ASSERT_TRUE(r.ok() && r->generated.size() == 2);
    counts[size_t(r->generated[1])] += 1;
    kept += r->accepted;
  }
  std::vector<std::pair<double, double>> bins;
  for (size_t i = 0; i < V; ++i) {
    if (expected[i] == 0) EXPECT_EQ(counts[i], 0) << i;
    else bins.push_back({expected[i] * double(trials), counts[i]});
  }
  const auto [chi, critical] = chi_squared(bins);
  std::printf("second token: chi-squared %.1f (0.1%% critical %.1f), drafts kept %zu of %zu\n", chi, critical, kept, trials);
  EXPECT_LT(chi, critical);
  EXPECT_GT(kept, trials / 10) << "the likeliest drafts should be kept often";
  EXPECT_LT(kept, trials * 9 / 10) << "the unlikely drafts should be replaced often";
  std::filesystem::remove_all(dir);
}

// A draft model (`--draft MODEL`): the target as its own draft is always right; a model of
// other weights is mostly wrong; either way the output is the target's greedy output.
TEST_F(Speculative, DraftModelsProposeAndTheTargetDecides) {
  const std::vector<int> prompt{0, 1135, 260, 2079};
  const GenerateResult plain = run(prompt, 96, std::nullopt);
  ThreadPool draft_pool(1);
  auto itself = ModelDraft::create(*model_, model_->config, draft_pool);
  ASSERT_TRUE(itself.ok()) << itself.error().message;
  SpeculativeOptions by_itself;
  by_itself.draft = [&](std::span<const int> context, size_t k) { return (*itself)->propose(context, k); };
  const GenerateResult same = run(prompt, 96, by_itself);
  EXPECT_EQ(same.generated, plain.generated);
  EXPECT_EQ(same.accepted, same.drafted) << "the target's own greedy drafts are all kept";
  EXPECT_LE(same.passes * 4, plain.passes) << "about max_draft + 1 tokens per pass";

  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("larql_draft_" + std::to_string(::getpid()));
  SynthSpec spec{.family = "llama", .hidden = 64, .layers = 1, .ffn = 128, .heads = 2, .kv_heads = 1, .vocab = model_->config.vocab,
                 .context = 512, .dtype = DType::f32, .seed = 9};
  ASSERT_TRUE(write_synthetic_checkpoint(dir.string(), spec).ok());
  auto other_model = load_model(dir.string());
  ASSERT_TRUE(other_model.ok()) << other_model.error().message;
  auto other = ModelDraft::create(*other_model, model_->config, draft_pool);
  ASSERT_TRUE(other.ok());
  SpeculativeOptions by_other;
  by_other.draft = [&](std::span<const int> context, size_t k) { return (*other)->propose(context, k); };
  const GenerateResult different = run(prompt, 96, by_other);
  EXPECT_EQ(different.generated, plain.generated);
  EXPECT_GT(different.drafted, 0u);
  EXPECT_LT(different.accepted * 4, different.drafted) << "random weights rarely guess the demo model";

  // Its cache follows the context: after proposing for one context, a context that parts
  // from it earlier gets what a fresh draft proposes.
  std::vector<int> a = prompt, b = prompt;
  a.insert(a.end(), {7, 8, 9});
  b.insert(b.end(), {7, 40});
  auto fresh = ModelDraft::create(*other_model, model_->config, draft_pool);
  ASSERT_TRUE(fresh.ok());
  (void)(*other)->propose(a, 5);
  EXPECT_EQ((*other)->propose(b, 5), (*fresh)->propose(b, 5));

  spec.vocab = 300;
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(write_synthetic_checkpoint(dir.string(), spec).ok());
  auto small = load_model(dir.string());
  ASSERT_TRUE(small.ok());
  auto refused = ModelDraft::create(*small, model_->config, draft_pool);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("vocabulary has 300 tokens, the target's 4096"), std::string::npos) << refused.error().message;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace larql
