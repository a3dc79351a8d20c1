// The committed demo models (models/demo, demo-moe, demo-draft) against the PyTorch that trained them:
// tools/train_demo_model.py saved, for three prompts, its tokenizer's ids and the greedy
// continuation of the bf16 weights computed in f32 (reference.json). Our tokenizer and
// forward pass must give the same ids.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "infer/local_ffn.h"
#include "model/loader.h"
#include "support/greedy.h"

namespace larql {
namespace {

// The committed demo models: the Llama, and the Mixtral-shaped mixture of experts.
class DemoModel : public ::testing::TestWithParam<std::string> {};

TEST_P(DemoModel, TokenizerAndGreedyIdsMatchPyTorch) {
  const std::string dir = std::string(LARQL_SOURCE_DIR "/models/") + GetParam();
  const char* kDemoDir = dir.c_str();
  ASSERT_TRUE(std::filesystem::exists(std::string(kDemoDir) + "/reference.json"))
      << kDemoDir << "/reference.json is missing (tools/train_demo_model.py writes it)";
  auto model = load_model(kDemoDir);
  ASSERT_TRUE(model.ok()) << model.error().message;
  auto tok = load_tokenizer_for(*model, kDemoDir, std::nullopt);
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  ASSERT_TRUE(*tok);
  std::ifstream file(std::string(kDemoDir) + "/reference.json");
  const auto reference = nlohmann::json::parse(file);
  ASSERT_GE(reference["references"].size(), 3u);

  ThreadPool pool(1);
  LocalFfn ffn(*model, pool);
  for (const auto& r : reference["references"]) {
    const auto prompt = r["prompt"].get<std::string>();
    const auto prompt_ids = r["prompt_ids"].get<std::vector<int>>();
    const auto expected = r["greedy_ids"].get<std::vector<int>>();
    EXPECT_EQ((*tok)->encode(prompt), prompt_ids) << prompt;

    std::vector<std::vector<float>> logits;
    const auto ids = test::greedy_with_logits(*model, ffn, prompt_ids, 40, &logits);
    // PyTorch stopped at the end token; so must the comparison.
    const std::vector<int> ours(ids.begin(), ids.begin() + std::ptrdiff_t(std::min(ids.size(), expected.size())));
    EXPECT_EQ(ours, expected) << prompt;
    if (expected.size() < ids.size()) {
      EXPECT_TRUE(std::count(model->config.eos_ids.begin(), model->config.eos_ids.end(), ids[expected.size()]))
          << prompt << ": PyTorch ended the text after " << expected.size() << " tokens; we did not";
    }
    std::printf("%s -> %s\n", prompt.c_str(), (*tok)->decode(ours).c_str());
  }
}

INSTANTIATE_TEST_SUITE_P(Committed, DemoModel, ::testing::Values("demo", "demo-moe", "demo-draft"), [](const auto& info) {
  return info.param == "demo" ? std::string("llama") : info.param == "demo-moe" ? std::string("mixtral") : std::string("draft");
});

}  // namespace
}  // namespace larql
