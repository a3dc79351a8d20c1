// Several sequences in one pass (Transformer::forward_batch) give each sequence exactly
// the logits it gets alone — a prefill chunk beside decode steps, different positions,
// different lengths — and each layer's FFN is called once per pass, whatever the number
// of sequences: the basis of continuous batching.
#include <gtest/gtest.h>

#include "infer/local_ffn.h"
#include "infer/transformer.h"
#include "model/loader.h"
#include "support/demo_model.h"
#include "support/reference_fixtures.h"

namespace larql {
namespace {

// Counts FFN calls and rows, passing them to the local FFN.
class CountingFfn : public FfnBackend {
 public:
  explicit CountingFfn(FfnBackend& inner) : inner_(inner) {}
  Status forward(uint32_t layer, std::span<const float> x, size_t rows, std::span<float> out) override {
    ++calls;
    this->rows += rows;
    return inner_.forward(layer, x, rows, out);
  }
  size_t calls = 0, rows = 0;

 private:
  FfnBackend& inner_;
};

void expect_batch_equals_alone(const std::string& model_path) {
  auto model = load_model(model_path);
  ASSERT_TRUE(model.ok()) << model.error().message;
  ThreadPool pool(2);
  LocalFfn local(*model, pool);
  CountingFfn ffn(local);
  const std::vector<std::vector<int>> prompts{{2, 5, 6, 7, 40, 41}, {2, 9}, {2, 100, 101, 102, 103, 104, 105, 106, 107}};

  // Alone: each prompt's prefill, then three greedy-like steps fed with fixed tokens.
  const std::vector<int> feed{11, 12, 13};
  std::vector<std::vector<std::vector<float>>> alone(prompts.size());
  for (size_t s = 0; s < prompts.size(); ++s) {
    Transformer t(*model, ffn, pool);
    std::vector<float> l;
    ASSERT_TRUE(t.forward(prompts[s], 0, l).ok());
    alone[s].push_back(l);
    for (size_t k = 0; k < feed.size(); ++k) {
      ASSERT_TRUE(t.forward({&feed[k], 1}, prompts[s].size() + k, l).ok());
      alone[s].push_back(l);
    }
  }

  // Together: sequence 0 prefills alone first; then sequence 0 decodes while 1 and 2
  // prefill in the same pass; then all three decode together.
  Transformer t(*model, ffn, pool);
  std::vector<KvCache> caches(prompts.size());
  std::vector<float> l;
  ASSERT_TRUE(t.forward_batch(std::vector<SequenceChunk>{{&caches[0], prompts[0], 0, prompts[0].size() - 1}}, l).ok());
  EXPECT_EQ(l, alone[0][0]);
  const size_t calls_before = ffn.calls;
  std::vector<SequenceChunk> mixed{{&caches[0], {&feed[0], 1}, prompts[0].size(), 0},
                                   {&caches[1], prompts[1], 0, prompts[1].size() - 1},
                                   {&caches[2], prompts[2], 0, prompts[2].size() - 1}};
  ASSERT_TRUE(t.forward_batch(mixed, l).ok());
  EXPECT_EQ(ffn.calls - calls_before, model->config.layers) << "one FFN call per layer for the whole pass";
  const size_t V = model->config.vocab;
  ASSERT_EQ(l.size(), 3 * V);
  EXPECT_EQ(std::vector<float>(l.begin(), l.begin() + V), alone[0][1]) << "sequence 0's decode step";
  EXPECT_EQ(std::vector<float>(l.begin() + V, l.begin() + 2 * V), alone[1][0]) << "sequence 1's prefill";
  EXPECT_EQ(std::vector<float>(l.begin() + 2 * V, l.end()), alone[2][0]) << "sequence 2's prefill";
  for (size_t k = 1; k < feed.size(); ++k) {
    std::vector<SequenceChunk> step;
    for (size_t s = 0; s < prompts.size(); ++s) {
      const size_t fed = s == 0 ? k : k - 1;  // sequence 0 is one step ahead
      step.push_back({&caches[s], {&feed[fed], 1}, prompts[s].size() + fed, 0});
    }
    const size_t rows_before = ffn.rows;
    ASSERT_TRUE(t.forward_batch(step, l).ok());
    EXPECT_EQ(ffn.rows - rows_before, 3 * model->config.layers) << "three rows per layer call";
    for (size_t s = 0; s < prompts.size(); ++s)
      EXPECT_EQ(std::vector<float>(l.begin() + s * V, l.begin() + (s + 1) * V), alone[s][s == 0 ? k + 1 : k])
          << "sequence " << s << " step " << k;
  }
  // A pass may not hold two chunks of one sequence.
  std::vector<SequenceChunk> twice{{&caches[0], {&feed[0], 1}, 9, 0}, {&caches[0], {&feed[1], 1}, 10, 0}};
  EXPECT_FALSE(t.forward_batch(twice, l).ok());
}

TEST(BatchForward, DemoModelSequencesTogetherEqualEachAlone) { expect_batch_equals_alone(test::kDemo); }

TEST(BatchForward, Gemma3SlidingWindowsStayPerSequence) {
  expect_batch_equals_alone(test::gemma_fixture("gemma3").string());
}

}  // namespace
}  // namespace larql
