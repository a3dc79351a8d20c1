// Gemma through two shard processes, measured by `larql bench --local`: over the f32 wire
// the logits equal the local model's bit for bit (the client applies Gemma's pre- and
// post-FFN norms, the shards compute only the MLP); f16, q8 and i8 agreement is printed.
// And f16 overflow for real: with one layer's down-projection scaled so that its MLP
// outputs pass 65504 (Gemma's post-FFN norm then brings them back, as in real Gemma 3),
// those responses come back as f32 (counted by the shard and by `larql bench`), and no
// logit is ever infinite.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "model/safetensors.h"
#include "support/command.h"
#include "support/reference_fixtures.h"
#include "support/process.h"
#include "support/prometheus.h"

namespace larql {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// `larql bench --local --json` with two shards splitting the layers in half.
json bench_two_shards(const std::string& model, size_t layers, const std::string& wires, const std::vector<int>& prompt,
                      double* shard_fallbacks = nullptr) {
  const std::string low = "0-" + std::to_string(layers / 2 - 1), high = std::to_string(layers / 2) + "-" + std::to_string(layers - 1);
  test::ChildProcess a({"serve", model, "--port", "0", "--layers", low, "--wire-i8", "--threads", "1"});
  test::ChildProcess b({"serve", model, "--port", "0", "--layers", high, "--wire-i8", "--threads", "1"});
  EXPECT_TRUE(test::wait_healthy(a.url()) && test::wait_healthy(b.url()));
  std::string ids;
  for (int id : prompt) ids.append(" ").append(std::to_string(id));
  const auto r = test::run_command(std::string(LARQL_BINARY) + " bench " + model + " --ffn '" + low + "=" + a.url() + "," + high +
                                   "=" + b.url() + "' --wire " + wires + " --prompt-ids" + ids +
                                   " --steps 24 --local --json --threads 1");
  EXPECT_EQ(r.status, 0) << r.output;
  if (shard_fallbacks)
    *shard_fallbacks = test::server_metric(a.url(), "larql_shard_f32_fallbacks_total") +
                       test::server_metric(b.url(), "larql_shard_f32_fallbacks_total");
  return r.status == 0 ? json::parse(r.output) : json::object();
}

void print_formats(const std::string& what, const json& doc) {
  for (const auto& f : doc.value("formats", json::array()))
    std::printf("%s %s: top-1 %.3f, top-5 %.3f, max |logit diff| %.3g, mean KL %.3g, f32 fallbacks %zu\n", what.c_str(),
                f["wire"].get<std::string>().c_str(), f["top1_agreement"].get<double>(), f["topk_agreement"].get<double>(),
                f["max_abs_logit_diff"].get<double>(), f["mean_kl"].get<double>(), f["f32_fallbacks"].get<size_t>());
}

class GemmaRemote : public ::testing::TestWithParam<std::string> {};

TEST_P(GemmaRemote, TwoShardsOverF32AreBitIdenticalToLocal) {
  const std::string model = test::gemma_fixture(GetParam()).string();
  const size_t layers = GetParam() == "gemma2" ? 4 : GetParam() == "gemma4e" ? 10 : 8;  // the fixtures' (tools/make_gemma_fixtures.sh)
  const json doc = bench_two_shards(model, layers, "f32,f16,q8,i8", test::gemma_reference(GetParam()).tokens);
  ASSERT_TRUE(doc.contains("formats")) << doc.dump();
  EXPECT_TRUE(doc["remote_f32_exact"].get<bool>()) << "remote f32 must equal the local model bit for bit";
  for (const auto& f : doc["formats"]) {
    if (f["wire"] == "f32") {
      EXPECT_EQ(f["max_abs_logit_diff"].get<double>(), 0.0);
    }
    EXPECT_TRUE(std::isfinite(f["max_abs_logit_diff"].get<double>())) << f["wire"];
  }
  print_formats(GetParam(), doc);
}

// gemma4e: the E model's per-layer embeddings and shared KV are the client's; its shards see
// only the MLPs, double-wide ones among them.
INSTANTIATE_TEST_SUITE_P(Families, GemmaRemote, ::testing::Values("gemma2", "gemma3", "gemma4", "gemma4e"));

TEST(GemmaOverflow, F16ResponsesThatWouldOverflowComeBackAsF32AndNothingIsInfinite) {
  // The Gemma 3 fixture with layer 3's down_proj ×1e6: its MLP outputs reach past 65504.
  const fs::path dir = fs::temp_directory_path() / ("larql_gemma_overflow_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  for (const char* name : {"config.json", "generation_config.json", "tokenizer.json"})
    fs::copy_file(test::gemma_fixture("gemma3") / name, dir / name, fs::copy_options::overwrite_existing);
  auto file = read_safetensors((test::gemma_fixture("gemma3") / "model.safetensors").string());
  ASSERT_TRUE(file.ok());
  std::vector<TensorToWrite> tensors;
  for (const auto& [name, t] : file->tensors) {
    std::vector<float> v(t.bytes / 4);
    std::memcpy(v.data(), t.data, t.bytes);
    if (name == "model.layers.3.mlp.down_proj.weight")
      for (float& x : v) x *= 1e6f;
    tensors.push_back({name, DType::f32, t.shape, encode_tensor(DType::f32, v)});
  }
  ASSERT_TRUE(write_safetensors((dir / "model.safetensors").string(), tensors).ok());

  double shard_fallbacks = 0;
  const json doc = bench_two_shards(dir.string(), 8, "f32,f16", test::gemma_reference("gemma3").tokens, &shard_fallbacks);
  ASSERT_TRUE(doc.contains("formats")) << doc.dump();
  EXPECT_TRUE(doc["remote_f32_exact"].get<bool>());
  const json& f16 = doc["formats"][1];
  ASSERT_EQ(f16["wire"], "f16");
  EXPECT_GT(f16["f32_fallbacks"].get<size_t>(), 0u) << "layer 3's responses cannot be f16";
  EXPECT_GT(shard_fallbacks, 0.0) << "the shard counts them in /metrics";
  EXPECT_LT(f16["f32_fallbacks"].get<size_t>(), size_t(f16["round_trips_per_token"].get<double>() * 24))
      << "only the overflowing layer's responses fall back";
  EXPECT_TRUE(std::isfinite(f16["max_abs_logit_diff"].get<double>())) << "no value may be infinite";
  EXPECT_TRUE(std::isfinite(f16["max_kl"].get<double>()));
  print_formats("gemma3 with f16 overflow", doc);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace larql
