// The same model in two formats gives the same tokens: the demo model as a llama2.c file and
// as a Hugging Face checkpoint (half-split RoPE, permuted q/k rows) agree on greedy ids and
// on logits within 1e-5. Also: what a broken checkpoint's error names.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "infer/generate.h"
#include "infer/local_ffn.h"
#include "model/hf_loader.h"
#include "model/loader.h"
#include "model/safetensors.h"
#include "support/greedy.h"
#include "support/hf_fixture.h"
#include "support/demo_llama2c.h"

namespace larql {
namespace {

namespace fs = std::filesystem;

class HfCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("larql_hf_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

std::vector<int> greedy_ids(const Model& m, const std::vector<int>& prompt, size_t steps, std::vector<std::vector<float>>* logits) {
  ThreadPool pool(2);
  LocalFfn ffn(m, pool);
  return test::greedy_with_logits(m, ffn, prompt, steps, logits, 2);
}

TEST_F(HfCheckpoint, DemoLlama2cSameTokensInBothFormats) {
  auto original = load_model(test::demo_llama2c());
  ASSERT_TRUE(original.ok()) << original.error().message;
  test::write_hf_checkpoint(*original, dir_ / "f32", DType::f32);
  auto hf = load_model((dir_ / "f32").string());
  ASSERT_TRUE(hf.ok()) << hf.error().message;
  EXPECT_EQ(hf->config.rope_layout, RopeLayout::half_split);

  const std::vector<int> prompt{1, 429, 480, 375, 438, 437, 272, 284, 438, 441};
  std::vector<std::vector<float>> la, lb;
  const auto a = greedy_ids(*original, prompt, 64, &la);
  const auto b = greedy_ids(*hf, prompt, 64, &lb);
  EXPECT_EQ(a, b);
  float max_diff = 0;
  for (size_t s = 0; s < la.size(); ++s)
    for (size_t i = 0; i < la[s].size(); ++i) max_diff = std::max(max_diff, std::fabs(la[s][i] - lb[s][i]));
  EXPECT_LE(max_diff, 1e-5f);
  std::printf("max |logit difference| llama2.c vs Hugging Face f32 over 64 steps: %g\n", max_diff);

  // bf16 and f16 copies load and run in their stored type (no f32 copy is made).
  for (DType t : {DType::bf16, DType::f16}) {
    const auto sub = dir_ / std::string(dtype_name(t));
    test::write_hf_checkpoint(*original, sub, t);
    auto half = load_model(sub.string());
    ASSERT_TRUE(half.ok()) << half.error().message;
    EXPECT_EQ(half->layers[0].gate.dtype, t);
    std::vector<std::vector<float>> lh;
    const auto h = greedy_ids(*half, prompt, 16, &lh);
    size_t same = 0;
    for (size_t i = 0; i < h.size(); ++i) same += h[i] == a[i];
    std::printf("%s copy: %zu of 16 greedy ids equal to f32\n", std::string(dtype_name(t)).c_str(), same);
    EXPECT_GE(same, 8u);
  }
}

TEST_F(HfCheckpoint, ShardedSafetensorsLoadLikeOneFile) {
  auto original = load_model(test::demo_llama2c());
  ASSERT_TRUE(original.ok());
  test::write_hf_checkpoint(*original, dir_ / "one", DType::f32);
  // Split the single file into two shards with an index, as large checkpoints ship.
  auto whole = read_safetensors((dir_ / "one" / "model.safetensors").string());
  ASSERT_TRUE(whole.ok());
  fs::create_directories(dir_ / "two");
  fs::copy_file(dir_ / "one" / "config.json", dir_ / "two" / "config.json");
  std::vector<TensorToWrite> parts[2];
  nlohmann::json index{{"metadata", nlohmann::json::object()}, {"weight_map", nlohmann::json::object()}};
  size_t i = 0;
  for (const auto& [name, t] : whole->tensors) {
    const int part = int(i++ % 2);
    parts[part].push_back({name, t.dtype, t.shape, std::vector<uint8_t>(t.data, t.data + t.bytes)});
    index["weight_map"][name] = "model-0000" + std::to_string(part + 1) + "-of-00002.safetensors";
  }
  for (int part = 0; part < 2; ++part)
    ASSERT_TRUE(write_safetensors((dir_ / "two" / ("model-0000" + std::to_string(part + 1) + "-of-00002.safetensors")).string(),
                                  parts[part]).ok());
  std::ofstream(dir_ / "two" / "model.safetensors.index.json") << index.dump();
  auto sharded = load_model((dir_ / "two").string());
  ASSERT_TRUE(sharded.ok()) << sharded.error().message;
  EXPECT_EQ(sharded->files.size(), 2u);
  const std::vector<int> prompt{1, 429, 480};
  std::vector<std::vector<float>> la, lb;
  auto single = load_model((dir_ / "one").string());
  ASSERT_TRUE(single.ok()) << single.error().message;
  EXPECT_EQ(greedy_ids(*single, prompt, 8, &la), greedy_ids(*sharded, prompt, 8, &lb));
  EXPECT_EQ(la, lb);
}

TEST_F(HfCheckpoint, ErrorsNameTheFieldOrTensor) {
  fs::create_directories(dir_);
  std::ofstream(dir_ / "config.json") << R"({"model_type": "gpt2", "hidden_size": 8})";
  auto r = load_model(dir_.string());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("model_type 'gpt2' is not supported"), std::string::npos) << r.error().message;

  std::ofstream(dir_ / "config.json") << R"({"model_type": "llama", "hidden_size": 8, "intermediate_size": 16,
      "num_hidden_layers": 1, "num_attention_heads": 2, "vocab_size": 4, "max_position_embeddings": 8})";
  r = load_model(dir_.string());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("model.safetensors"), std::string::npos) << r.error().message;

  ASSERT_TRUE(write_safetensors((dir_ / "model.safetensors").string(),
                                {{"model.embed_tokens.weight", DType::f32, {4, 9}, std::vector<uint8_t>(4 * 9 * 4)}}).ok());
  r = load_model(dir_.string());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("'model.embed_tokens.weight' has shape [4, 9], expected [4, 8]"), std::string::npos)
      << r.error().message;

  ASSERT_TRUE(write_safetensors((dir_ / "model.safetensors").string(),
                                {{"model.embed_tokens.weight", DType::f32, {4, 8}, std::vector<uint8_t>(4 * 8 * 4)}}).ok());
  r = load_model(dir_.string());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("'model.norm.weight' is missing"), std::string::npos) << r.error().message;
}

// An optional field of the wrong JSON type is refused by name; it threw out of the loader
// (larql aborted) or was read as absent. Null still counts as absent.
TEST_F(HfCheckpoint, OptionalFieldsOfTheWrongTypeAreNamed) {
  fs::create_directories(dir_);
  auto error_with = [&](const std::string& extra) {
    std::ofstream(dir_ / "config.json") << R"({"model_type": "llama", "hidden_size": 8, "intermediate_size": 16,
        "num_hidden_layers": 1, "num_attention_heads": 2, "vocab_size": 4, "max_position_embeddings": 8, )" + extra + "}";
    auto config = read_hf_config(dir_.string());
    return config.ok() ? std::string("loaded") : config.error().message;
  };
  const std::string path = (dir_ / "config.json").string();
  EXPECT_EQ(error_with(R"("rms_norm_eps": "tiny")"), path + ": field 'rms_norm_eps' must be a number, not \"tiny\"");
  EXPECT_EQ(error_with(R"("attention_bias": 1)"), path + ": field 'attention_bias' must be true or false, not 1");
  EXPECT_EQ(error_with(R"("rope_theta": "1e6")"), path + ": field 'rope_theta' must be a number, not \"1e6\"");
  EXPECT_EQ(error_with(R"("rope_scaling": {"rope_type": "llama3", "factor": "8"})"),
            path + ": rope_scaling: field 'factor' must be a number, not \"8\"");
  EXPECT_EQ(error_with(R"("text_config": {"hidden_act": 5})"), path + ": text_config: field 'hidden_act' must be a string, not 5");
  EXPECT_EQ(error_with(R"("rope_scaling": null, "rms_norm_eps": null)"), "loaded");
}

// Per-layer tables are sized from the layer count before any tensor is read: a count
// beyond any model's is refused by name (10^8 aborted larql on a failed allocation).
TEST_F(HfCheckpoint, ALayerCountBeyondAnyModelsIsRefused) {
  fs::create_directories(dir_);
  auto error_with = [&](size_t layers) {
    std::ofstream(dir_ / "config.json") << R"({"model_type": "llama", "hidden_size": 8, "intermediate_size": 16,
        "num_attention_heads": 2, "vocab_size": 4, "max_position_embeddings": 8, "num_hidden_layers": )" +
                                               std::to_string(layers) + "}";
    auto config = read_hf_config(dir_.string());
    return config.ok() ? std::string("loaded") : config.error().message;
  };
  EXPECT_EQ(error_with(1024), "loaded");
  EXPECT_EQ(error_with(100000000), (dir_ / "config.json").string() + ": num_hidden_layers is 100000000; expected at most 1024");
}

TEST_F(HfCheckpoint, SafetensorsRangesAreChecked) {
  fs::create_directories(dir_);
  const auto path = (dir_ / "bad.safetensors").string();
  ASSERT_TRUE(write_safetensors(path, {{"x", DType::f32, {4}, std::vector<uint8_t>(16)}}).ok());
  fs::resize_file(path, fs::file_size(path) - 1);
  auto r = read_safetensors(path);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("tensor 'x'"), std::string::npos) << r.error().message;
}

}  // namespace
}  // namespace larql
