// The engine against the reference C implementation (llama2.c run.c) on the demo model
// exported to llama2.c's format: tokenisation, greedy ids and printed text of
// tests/data/llama2c/demo.run_c.json (made by tools/make_llama2c_oracle.py).
#include <gtest/gtest.h>

#include "infer/generate.h"
#include "infer/local_ffn.h"
#include "model/llama2c_tokenizer.h"
#include "model/loader.h"
#include "support/demo_llama2c.h"

namespace larql {
namespace {

TEST(ReferenceParity, DemoModelMatchesRunC) {
  const auto expected = test::demo_run_c_oracle();
  auto model = load_model(test::demo_llama2c());
  ASSERT_TRUE(model.ok()) << model.error().message;
  auto tok = Llama2cTokenizer::load(test::demo_ids_tokenizer(), model->config.vocab);
  ASSERT_TRUE(tok.ok()) << tok.error().message;

  ThreadPool pool(2);
  ASSERT_EQ(expected["sequences"].size(), 3u);
  for (const auto& seq : expected["sequences"]) {
    const std::string prompt = seq["prompt"];
    SCOPED_TRACE("prompt of '" + seq["demo_text"].get<std::string>() + "'");
    const auto prompt_ids = seq["prompt_ids"].get<std::vector<int>>();
    const auto continuation = seq["continuation_ids"].get<std::vector<int>>();
    ASSERT_GE(continuation.size(), 64u);
    EXPECT_EQ((*tok)->encode(prompt), prompt_ids);

    LocalFfn ffn(*model, pool);
    Transformer transformer(*model, ffn, pool);
    auto result = generate(transformer, prompt_ids, {.max_new_tokens = continuation.size(), .ignore_eos = false, .sampler = {}});
    ASSERT_TRUE(result.ok()) << result.error().message;
    EXPECT_EQ(result->generated, continuation);

    // run.c prints decode(token, next) for every step, prompt included, and a newline.
    std::vector<int> all = prompt_ids;
    all.insert(all.end(), continuation.begin(), continuation.end());
    EXPECT_EQ((*tok)->decode(all) + "\n", seq["printed"].get<std::string>());
  }
}

TEST(ReferenceParity, ContextLimitStopsGeneration) {
  auto model = load_model(test::demo_llama2c());
  ASSERT_TRUE(model.ok());
  const size_t context = model->config.context;
  ThreadPool pool(1);
  LocalFfn ffn(*model, pool);
  Transformer transformer(*model, ffn, pool);
  // context − 8 prompt positions: 9 more tokens fit (the last needs no position).
  std::vector<int> prompt(context - 8, 300);
  prompt[0] = 1;
  auto result = generate(transformer, prompt, {.max_new_tokens = 50, .ignore_eos = true, .sampler = {}});
  ASSERT_TRUE(result.ok()) << result.error().message;
  EXPECT_EQ(result->stop, StopReason::context);
  EXPECT_EQ(result->generated.size(), 9u);
}

}  // namespace
}  // namespace larql
