// The engine against the reference C implementation (llama2.c run.c): tokenisation,
// greedy ids and printed text for the prompts of aidreams260K.expected.json.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "infer/generate.h"
#include "infer/local_ffn.h"
#include "model/llama2c_tokenizer.h"
#include "model/loader.h"
#include "support/shared_models.h"

namespace larql {
namespace {

TEST(ReferenceParity, Aidreams260KMatchesRunC) {
  LARQL_REQUIRE_SHARED_MODEL("aidreams260K.expected.json");
  std::ifstream in(test::shared_model("aidreams260K.expected.json"));
  const auto expected = nlohmann::json::parse(in);
  auto model = load_model(test::shared_model(expected["model"]));
  ASSERT_TRUE(model.ok()) << model.error().message;
  auto tok = Llama2cTokenizer::load(test::shared_model(expected["tokenizer"]), model->config.vocab);
  ASSERT_TRUE(tok.ok()) << tok.error().message;

  ThreadPool pool(2);
  ASSERT_EQ(expected["sequences"].size(), 3u);
  for (const auto& seq : expected["sequences"]) {
    const std::string prompt = seq["prompt"];
    SCOPED_TRACE("prompt '" + prompt + "'");
    const auto prompt_ids = seq["prompt_ids"].get<std::vector<int>>();
    const auto continuation = seq["continuation_ids"].get<std::vector<int>>();
    ASSERT_GE(continuation.size(), 64u);
    EXPECT_EQ((*tok)->encode(prompt), prompt_ids);

    LocalFfn ffn(*model, pool);
    Transformer transformer(*model, ffn, pool);
    auto result = generate(transformer, prompt_ids, {.max_new_tokens = continuation.size(), .ignore_eos = false, .sampler = {}});
    ASSERT_TRUE(result.ok()) << result.error().message;
    EXPECT_EQ(result->generated, continuation);

    // run.c prints decode(token, next) for every step, prompt included.
    std::vector<int> all = prompt_ids;
    all.insert(all.end(), continuation.begin(), continuation.end());
    std::string text;
    text = (*tok)->decode(all);
    EXPECT_EQ(text + "\n", seq["text"].get<std::string>());  // run.c ends its output with a newline
  }
}

TEST(ReferenceParity, ContextLimitStopsGeneration) {
  LARQL_REQUIRE_SHARED_MODEL("aidreams260K.bin");
  auto model = load_model(test::shared_model("aidreams260K.bin"));
  ASSERT_TRUE(model.ok());
  ThreadPool pool(1);
  LocalFfn ffn(*model, pool);
  Transformer transformer(*model, ffn, pool);
  // 120 prompt positions of a 128-position model: 9 more tokens fit (the last needs no position).
  std::vector<int> prompt(120, 300);
  prompt[0] = 1;
  auto result = generate(transformer, prompt, {.max_new_tokens = 50, .ignore_eos = true, .sampler = {}});
  ASSERT_TRUE(result.ok()) << result.error().message;
  EXPECT_EQ(result->stop, StopReason::context);
  EXPECT_EQ(result->generated.size(), 128u - 120u + 1u);
}

}  // namespace
}  // namespace larql
