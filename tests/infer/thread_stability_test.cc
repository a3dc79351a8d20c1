// The demo model as a llama2.c file (f32 weights, grouped-query attention, trained): greedy
// ids and the logits themselves do not depend on the thread count, and a prefill gives the
// same logits as feeding the prompt one token at a time.
#include <gtest/gtest.h>

#include "infer/generate.h"
#include "infer/local_ffn.h"
#include "model/loader.h"
#include "support/demo_llama2c.h"

namespace larql {
namespace {

const std::vector<int> kPrompt{1, 403, 407, 261, 378, 1102, 284, 259, 301, 270};

std::vector<int> greedy(const Model& model, size_t threads, std::vector<float>* last_logits) {
  ThreadPool pool(threads);
  LocalFfn ffn(model, pool);
  Transformer transformer(model, ffn, pool);
  auto result = generate(transformer, kPrompt, {.max_new_tokens = 100, .ignore_eos = true, .sampler = {}});
  EXPECT_TRUE(result.ok());
  std::vector<int> fed = kPrompt;
  fed.insert(fed.end(), result->generated.begin(), result->generated.end() - 1);
  // Recompute the final logits by one prefill over everything fed so far.
  Transformer again(model, ffn, pool);
  EXPECT_TRUE(again.forward(fed, 0, *last_logits).ok());
  return result->generated;
}

TEST(ThreadStability, DemoLlama2cSameIdsAndLogitsForAnyThreadCount) {
  auto model = load_model(test::demo_llama2c());
  ASSERT_TRUE(model.ok()) << model.error().message;
  EXPECT_LT(model->config.kv_heads, model->config.heads);  // exercises grouped-query attention
  EXPECT_EQ(model->layers[0].gate.dtype, DType::f32);
  std::vector<float> logits1, logits2, logits3;
  const auto ids1 = greedy(*model, 1, &logits1);
  const auto ids2 = greedy(*model, 2, &logits2);
  const auto ids3 = greedy(*model, 3, &logits3);
  EXPECT_EQ(ids1.size(), 100u);
  EXPECT_EQ(ids1, ids2);
  EXPECT_EQ(ids1, ids3);
  EXPECT_EQ(logits1, logits2);
  EXPECT_EQ(logits1, logits3);
}

TEST(ThreadStability, PrefillEqualsTokenByToken) {
  auto model = load_model(test::demo_llama2c());
  ASSERT_TRUE(model.ok());
  ThreadPool pool(2);
  LocalFfn ffn(*model, pool);
  Transformer batched(*model, ffn, pool), stepwise(*model, ffn, pool);
  std::vector<float> a, b;
  ASSERT_TRUE(batched.forward(kPrompt, 0, a).ok());
  for (size_t i = 0; i < kPrompt.size(); ++i) ASSERT_TRUE(stepwise.forward({&kPrompt[i], 1}, i, b).ok());
  EXPECT_EQ(a, b);
}

}  // namespace
}  // namespace larql
