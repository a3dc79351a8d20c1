// A sliding layer's cache keeps its window (kv_cache.h): the logits of a cache that keeps
// every position, bit for bit, over a sequence many windows long fed in passes of several
// sizes, trees of drafts and speculative decoding included; its memory bounded by the window
// whatever the length; a pass that reaches back past what it keeps refused by name.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <random>

#include "infer/draft_tree.h"
#include "infer/generate.h"
#include "infer/local_ffn.h"
#include "infer/model_draft.h"
#include "infer/transformer.h"
#include "kernels/attention.h"
#include "model/loader.h"
#include "model/synth.h"

namespace larql {
namespace {

namespace fs = std::filesystem;

constexpr size_t kWindow = 8, kTokens = 600;
// The most a sliding layer holds besides a pass's rows: the window, what a sequence may go
// back, a drop's step (64) and the rounding to key blocks at both ends.
constexpr size_t kHeld = kWindow + kKvRewindPositions + 64 + 2 * kKeyBlock;

// A Gemma 4 E model: sliding layers of a window of 8 between full ones, the last two layers
// reading earlier layers' caches, per-layer embeddings; f32, random weights.
class KvWindow : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("larql_kv_window_" + std::to_string(::getpid()));
    SynthSpec spec{.family = "gemma4", .hidden = 64, .layers = 6, .ffn = 128, .heads = 2, .kv_heads = 1, .head_dim = 16,
                   .sliding_window = kWindow, .vocab = 256, .context = 1024, .dtype = DType::f32, .seed = 3,
                   .ple_dim = 8, .kv_shared = 2, .sliding_period = 3};
    ASSERT_TRUE(write_synthetic_checkpoint((dir_ / "target").string(), spec).ok());
    spec.seed = 4;  // a draft model that is mostly wrong: its rejected drafts send it back
    ASSERT_TRUE(write_synthetic_checkpoint((dir_ / "draft").string(), spec).ok());
    auto model = load_model((dir_ / "target").string());
    ASSERT_TRUE(model.ok()) << model.error().message;
    model_ = new Model(std::move(*model));
    std::mt19937 rng(7);
    tokens_.resize(kTokens);
    for (int& t : tokens_) t = int(rng() % model_->config.vocab);
  }
  void SetUp() override { ASSERT_NE(model_, nullptr) << "the suite's model was not written"; }
  static void TearDownTestSuite() {
    delete model_;
    fs::remove_all(dir_);
  }
  // What layer l's cache holds: its first position and how many positions.
  static std::pair<size_t, size_t> held(const KvCache& cache, size_t l) {
    const KvCache::Layer& layer = cache.layers[l];
    return {layer.first, layer.values.empty() ? 0 : layer.values[0].size() / model_->config.layer(l).head_dim};
  }
  // Greedy tokens from `prompt` on a transformer of its own; `after` sees its cache at the end.
  static GenerateResult greedy(const std::vector<int>& prompt, GenerateOptions options,
                               const std::function<void(const KvCache&)>& after = {}) {
    ThreadPool pool(2);
    LocalFfn ffn(*model_, pool);
    Transformer t(*model_, ffn, pool);
    options.ignore_eos = true;
    auto r = generate(t, prompt, options);
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
    if (after) after(t.cache());
    return r.ok() ? *r : GenerateResult{};
  }
  static inline fs::path dir_;
  static inline Model* model_ = nullptr;
  static inline std::vector<int> tokens_;
};

TEST_F(KvWindow, KeepsTheWindowAndGivesTheLogitsOfACacheThatKeepsEverything) {
  const ModelConfig& c = model_->config;
  ThreadPool pool(2);
  LocalFfn ffn(*model_, pool);
  Transformer t(*model_, ffn, pool);
  KvCache windowed, everything;
  everything.rewind = SIZE_MAX;
  const size_t sizes[] = {37, 1, 1, 5, 1, 16, 1, 3};
  std::vector<float> a, b;
  size_t passes = 0;
  for (size_t pos = 0; pos < kTokens; ++passes) {
    const size_t n = std::min(sizes[passes % std::size(sizes)], kTokens - pos);
    const std::span<const int> fed(tokens_.data() + pos, n);
    ASSERT_TRUE(t.forward_batch(std::vector<SequenceChunk>{{&windowed, fed, pos, 0}}, a).ok());
    ASSERT_TRUE(t.forward_batch(std::vector<SequenceChunk>{{&everything, fed, pos, 0}}, b).ok());
    ASSERT_EQ(a, b) << "the pass at " << pos;
    pos += n;
  }
  const std::vector<size_t> windows = kv_windows(c);
  size_t sliding = 0, full = 0;
  for (size_t l = 0; l < c.layers; ++l) {
    if (!c.owns_kv(l)) {
      EXPECT_TRUE(windowed.layers[l].keys.empty()) << l;
      continue;
    }
    const auto [first, positions] = held(windowed, l);
    if (windows[l] == 0) {
      ++full;
      EXPECT_EQ(first, 0u) << l;
      EXPECT_EQ(positions, kTokens) << l;
    } else {
      ++sliding;
      EXPECT_EQ(windows[l], kWindow);
      EXPECT_LE(positions, kHeld) << l;
      EXPECT_GE(first + positions, kTokens) << l;
      EXPECT_EQ(first % kKeyBlock, 0u) << l;
      EXPECT_EQ(held(everything, l), std::make_pair(size_t(0), kTokens)) << l;
    }
  }
  EXPECT_GT(sliding, 0u);
  EXPECT_GT(full, 0u);
  EXPECT_LT(windowed.bytes(), everything.bytes());  // (the full layer, with heads twice as wide, holds most of both)
}

// A tree of drafts (its rows' slots, keep_path's moves), a pass that goes back as far as a
// draft model may, one that goes further (refused, the cache unchanged), and a new sequence
// in the same cache.
TEST_F(KvWindow, TreesAndPassesThatGoBackSeeWhatTheyWouldWithEveryPosition) {
  ThreadPool pool(2);
  LocalFfn ffn(*model_, pool);
  Transformer t(*model_, ffn, pool);
  KvCache windowed, everything;
  everything.rewind = SIZE_MAX;
  std::vector<float> a, b;
  const size_t pos = 400;
  for (KvCache* cache : {&windowed, &everything})
    for (size_t p = 0; p < pos; p += 50)
      ASSERT_TRUE(t.forward_batch(std::vector<SequenceChunk>{{cache, {tokens_.data() + p, 50}, p, 49}}, a).ok());
  ASSERT_GT(windowed.layers[0].first, 0u) << "the sliding layers dropped positions";

  const std::vector<std::vector<int>> drafts{{6, 7, 8}, {6, 9}, {10, 11}};
  const DraftTree tree = DraftTree::build(5, drafts, 100);
  const std::vector<size_t> path{0, 1, 4};  // 5 6 9
  for (KvCache* cache : {&windowed, &everything}) {
    std::vector<float>& out = cache == &windowed ? a : b;
    ASSERT_TRUE(t.forward_batch(std::vector<SequenceChunk>{{cache, tree.tokens, pos, 0, tree.parents}}, out).ok());
    keep_path(model_->config, *cache, path, pos);
  }
  EXPECT_EQ(a, b);
  const int next = 12;
  for (KvCache* cache : {&windowed, &everything})
    ASSERT_TRUE(t.forward_batch(std::vector<SequenceChunk>{{cache, {&next, 1}, pos + path.size(), 0}}, cache == &windowed ? a : b).ok());
  EXPECT_EQ(a, b) << "after the kept path";

  const size_t back = pos + path.size() - kKvRewindPositions;
  for (KvCache* cache : {&windowed, &everything})
    ASSERT_TRUE(t.forward_batch(std::vector<SequenceChunk>{{cache, {tokens_.data() + back, 3}, back, 0}}, cache == &windowed ? a : b).ok());
  EXPECT_EQ(a, b) << "a pass " << kKvRewindPositions << " positions back";

  const KvCache before = windowed;
  const auto refused = t.forward_batch(std::vector<SequenceChunk>{{&windowed, {tokens_.data() + 100, 1}, 100, 0}}, a);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("a pass at position 100 reads layer 0's keys from position 93 on, but its cache keeps only"),
            std::string::npos)
      << refused.error().message;
  EXPECT_EQ(windowed.layers[0].first, before.layers[0].first);
  EXPECT_EQ(windowed.layers[0].values, before.layers[0].values);

  KvCache fresh;
  ASSERT_TRUE(t.forward_batch(std::vector<SequenceChunk>{{&windowed, {tokens_.data() + 7, 20}, 0, 0}}, a).ok());
  ASSERT_TRUE(t.forward_batch(std::vector<SequenceChunk>{{&fresh, {tokens_.data() + 7, 20}, 0, 0}}, b).ok());
  EXPECT_EQ(a, b) << "a new sequence at 0 in a cache that had dropped positions";
}

// A prompt many windows long run in pieces (GenerateOptions::prefill_chunk) gives the
// tokens of one pass over it, and its sliding layers keep about their window throughout.
TEST_F(KvWindow, ALongPromptInPiecesGivesTheTokensOfOnePass) {
  const std::vector<int> prompt(tokens_.begin(), tokens_.begin() + 500);
  auto run = [&](size_t chunk, size_t& sliding_positions) {
    GenerateOptions options;
    options.max_new_tokens = 20;
    options.prefill_chunk = chunk;
    return greedy(prompt, options, [&](const KvCache& cache) {
             sliding_positions = cache.layers[0].values[0].capacity() / model_->config.layer(0).head_dim;
           }).generated;
  };
  size_t whole = 0, pieces = 0;
  const std::vector<int> one_pass = run(0, whole);
  EXPECT_EQ(run(40, pieces), one_pass);
  // The buffers themselves, not only their sizes: in pieces, never more; after one pass
  // over the whole prompt, given back by the next pass.
  EXPECT_LE(pieces, kHeld + 40);
  EXPECT_LE(whole, kHeld + 1);
}

// Decoding far past the window: speculative decoding, with lookup trees and with a draft
// model whose own sliding layers go back past the drafts the target rejects, gives plain
// greedy decoding's tokens.
TEST_F(KvWindow, SpeculativeDecodingFarPastTheWindowKeepsTheGreedyTokens) {
  ThreadPool draft_pool(1);
  const std::vector<int> prompt(tokens_.begin(), tokens_.begin() + 20);
  auto run = [&](std::optional<SpeculativeOptions> spec) {
    GenerateOptions options;
    options.max_new_tokens = 300;
    options.speculative = spec;
    return greedy(prompt, options);
  };
  const GenerateResult plain = run(std::nullopt);
  ASSERT_EQ(plain.generated.size(), 300u);
  const GenerateResult tree = run(SpeculativeOptions{.max_draft = 16, .branches = 4});
  EXPECT_EQ(tree.generated, plain.generated);

  auto draft_model = load_model((dir_ / "draft").string());
  ASSERT_TRUE(draft_model.ok()) << draft_model.error().message;
  auto draft = ModelDraft::create(*draft_model, model_->config, draft_pool);
  ASSERT_TRUE(draft.ok()) << draft.error().message;
  SpeculativeOptions by_model{.max_draft = 16, .adaptive = false};
  by_model.draft = [&](std::span<const int> context, size_t k) { return (*draft)->propose(context, k); };
  const GenerateResult drafted = run(by_model);
  EXPECT_EQ(drafted.generated, plain.generated);
  EXPECT_LT(drafted.accepted, drafted.drafted) << "some drafts rejected: the draft model went back";
}

}  // namespace
}  // namespace larql
