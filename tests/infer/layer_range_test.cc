// The forward pass split into layer ranges (PROTOCOL §13) gives a local run's bits: for every
// family and every legal split into two ranges, each range run by its own transformer's
// forward_range with its own caches (as a session shard does), a prompt, greedy decode steps
// and a chain of drafts taken back all give logits equal to one local transformer's.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <unistd.h>

#include "infer/local_ffn.h"
#include "infer/transformer.h"
#include "model/kv_sharing.h"
#include "model/loader.h"
#include "model/synth.h"
#include "support/demo_model.h"
#include "support/local_range.h"

namespace larql {
namespace {

namespace fs = std::filesystem;

using test::LocalRange;

// Prompt, then decode steps of fixed tokens, then a chain of 4 drafts of which one is kept
// (the next pass goes back over the other three), then one more step: every logit.
std::vector<std::vector<float>> passes(Transformer& t) {
  const std::vector<int> prompt{2, 17, 30, 41, 5, 9, 12, 3, 7, 100, 18, 33};
  std::vector<std::vector<float>> out;
  std::vector<float> l;
  EXPECT_TRUE(t.forward(prompt, 0, l).ok());
  out.push_back(l);
  size_t pos = prompt.size();
  for (int tok : {11, 12, 13}) {
    EXPECT_TRUE(t.forward({&tok, 1}, pos++, l).ok());
    out.push_back(l);
  }
  const std::vector<int> chain{21, 22, 23, 24, 25};
  EXPECT_TRUE(t.forward_logits(chain, pos, 0, l).ok());
  out.push_back(l);
  pos += 2;  // the first two rows kept
  const int next = 50;
  EXPECT_TRUE(t.forward({&next, 1}, pos, l).ok());
  out.push_back(l);
  return out;
}

void expect_every_split_equals_local(const Model& model) {
  ThreadPool pool(2);
  LocalFfn ffn(model, pool);
  Transformer local(model, ffn, pool);
  const auto expected = passes(local);
  const size_t L = model.config.layers;
  size_t splits = 0;
  for (size_t cut = 1; cut < L; ++cut) {
    if (!check_range_keeps_kv_groups(model.config, 0, cut - 1)) continue;  // not a legal split
    ++splits;
    LocalRange first(model, pool, 0, cut - 1), second(model, pool, cut, L - 1);
    Transformer client(model, ffn, pool);
    ASSERT_TRUE(client.set_layer_ranges({&first, &second}).ok());
    const auto got = passes(client);
    ASSERT_EQ(got.size(), expected.size());
    for (size_t p = 0; p < got.size(); ++p) EXPECT_EQ(got[p], expected[p]) << "cut before layer " << cut << ", pass " << p;
  }
  EXPECT_GT(splits, 0u);
  // One range of every layer, too.
  LocalRange all(model, pool, 0, L - 1);
  Transformer client(model, ffn, pool);
  ASSERT_TRUE(client.set_layer_ranges({&all}).ok());
  EXPECT_EQ(passes(client), expected);
}

class LayerRangeFamilies : public ::testing::TestWithParam<std::string> {};

SynthSpec spec_for(const std::string& family) {
  SynthSpec s{.family = family, .hidden = 64, .layers = 4, .ffn = 96, .heads = 4, .kv_heads = 2, .head_dim = 16,
              .sliding_window = 4, .vocab = 256, .context = 256, .dtype = DType::f32, .seed = 5};
  if (family == "gemma4e") s.family = "gemma4", s.layers = 6, s.heads = 2, s.kv_heads = 1, s.ple_dim = 8, s.kv_shared = 2, s.sliding_period = 2;
  if (family == "gemma4") s.sliding_period = 2;
  if (family == "qwen3moe" || family == "gpt-oss") s.experts = 4, s.experts_used = 2, s.expert_ffn = 32;
  return s;
}

TEST_P(LayerRangeFamilies, EverySplitIntoRangesEqualsTheLocalPassBitForBit) {
  const fs::path dir = fs::temp_directory_path() / ("larql_layer_range_" + std::to_string(::getpid()) + "_" + GetParam());
  const auto written = write_synthetic_checkpoint(dir.string(), spec_for(GetParam()));
  ASSERT_TRUE(written.ok()) << written.error().message;
  auto model = load_model(dir.string());
  fs::remove_all(dir);
  ASSERT_TRUE(model.ok()) << model.error().message;
  expect_every_split_equals_local(*model);
}

INSTANTIATE_TEST_SUITE_P(Families, LayerRangeFamilies,
                         ::testing::Values("llama", "gemma2", "gemma3", "gemma4", "gemma4e", "qwen3moe", "qwen2moe", "gpt-oss"),
                         [](const auto& info) {
                           std::string name = info.param;
                           std::erase(name, '-');
                           return name;
                         });

TEST(LayerRange, TheDemoModelSplitAnywhereEqualsTheLocalPass) {
  auto model = load_model(test::kDemo);
  ASSERT_TRUE(model.ok()) << model.error().message;
  expect_every_split_equals_local(*model);
}

TEST(LayerRange, RangesThatLeaveALayerUncoveredAreRefused) {
  auto model = load_model(test::kDemo);
  ASSERT_TRUE(model.ok());
  ThreadPool pool(1);
  LocalFfn ffn(*model, pool);
  LocalRange a(*model, pool, 0, 1), b(*model, pool, 3, 5);
  Transformer client(*model, ffn, pool);
  auto gap = client.set_layer_ranges({&a, &b});
  ASSERT_FALSE(gap.ok());
  EXPECT_NE(gap.error().message.find("layer 2"), std::string::npos) << gap.error().message;
  auto short_of_the_end = client.set_layer_ranges({&a});
  ASSERT_FALSE(short_of_the_end.ok());
  EXPECT_NE(short_of_the_end.error().message.find("2-5"), std::string::npos) << short_of_the_end.error().message;
}

}  // namespace
}  // namespace larql
