// `larql bench` against real shard processes: the JSON has every field, remote f32 is
// exact against the local FFN, and bytes per token equal what the message layouts say.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "support/command.h"
#include "support/demo_model.h"
#include "support/process.h"

namespace larql {
namespace {

using nlohmann::json;

using test::kDemo;

TEST(BenchCli, JsonFieldsExactF32AndBytesFromTheLayouts) {
  const std::string model = kDemo;
  test::ChildProcess a({"serve", model, "--port", "0", "--layers", "0-2", "--wire-i8", "--threads", "1"});
  test::ChildProcess b({"serve", model, "--port", "0", "--layers", "3-5", "--wire-i8", "--threads", "1"});
  ASSERT_TRUE(test::wait_healthy(a.url()) && test::wait_healthy(b.url()));
  const auto r = test::run_command(std::string(LARQL_BINARY) + " bench " + model + " --prompt 'A quiet machine' --ffn '0-2=" +
                                   a.url() + ",3-5=" + b.url() + "' --steps 20 --local --json --threads 1");
  ASSERT_EQ(r.status, 0) << r.output;
  const json doc = json::parse(r.output);
  EXPECT_EQ(doc["model"], "demo");
  EXPECT_EQ(doc["steps"], 20);
  EXPECT_EQ(doc["k"], 5);
  EXPECT_TRUE(doc["remote_f32_exact"].get<bool>());
  ASSERT_EQ(doc["formats"].size(), 4u);
  ASSERT_EQ(doc["layers"].size(), 6u);
  const size_t H = 384, layers = 6;
  // Per decoded token: one single-layer call per layer; request 16-byte header, response 12.
  const std::map<std::string, std::pair<size_t, size_t>> values_bytes{
      {"f32", {4 * H, 4 * H}}, {"f16", {2 * H, 2 * H}}, {"q8", {H / 32 * 34, H / 32 * 34}}, {"i8", {8 + H, 8 + H}}};
  for (const auto& f : doc["formats"]) {
    const std::string w = f["wire"];
    SCOPED_TRACE(w);
    for (const char* key : {"exact", "top1_agreement", "topk_agreement", "max_abs_logit_diff", "mean_kl", "max_kl",
                            "first_divergence_step", "bytes_sent_per_token", "bytes_received_per_token",
                            "round_trips_per_token", "ms_per_token", "server_ms_per_token", "f32_fallbacks",
                            "projected_tokens_per_second"})
      EXPECT_TRUE(f.contains(key)) << key;
    EXPECT_EQ(f["bytes_sent_per_token"].get<double>(), double(layers * (16 + values_bytes.at(w).first)));
    EXPECT_EQ(f["bytes_received_per_token"].get<double>(), double(layers * (12 + values_bytes.at(w).second)));
    EXPECT_EQ(f["round_trips_per_token"].get<double>(), double(layers));
    EXPECT_EQ(f["projected_tokens_per_second"].size(), 3u);
    // Each call's HTTP heads: "POST /v1/walk-ffn HTTP/1.1" and its fields one way, a status
    // line and fields back; a few hundred bytes, counted apart from the bodies.
    const double heads_sent = f["head_bytes_sent_per_token"].get<double>() / layers;
    const double heads_received = f["head_bytes_received_per_token"].get<double>() / layers;
    EXPECT_GT(heads_sent, 100.0);
    EXPECT_LT(heads_sent, 600.0);
    EXPECT_GT(heads_received, 50.0);
    EXPECT_LT(heads_received, 600.0);
    if (w == "f32") {
      EXPECT_TRUE(f["exact"].get<bool>());
      EXPECT_EQ(f["top1_agreement"], 1.0);
      EXPECT_EQ(f["topk_agreement"], 1.0);
      EXPECT_EQ(f["max_abs_logit_diff"], 0.0);
      EXPECT_EQ(f["mean_kl"], 0.0);
      EXPECT_EQ(f["max_kl"], 0.0);
      EXPECT_TRUE(f["first_divergence_step"].is_null());
    } else {  // lossy formats: some difference, but the same model
      EXPECT_FALSE(f["exact"].get<bool>());
      EXPECT_GT(f["max_abs_logit_diff"].get<double>(), 0.0);
      EXPECT_GE(f["top1_agreement"].get<double>(), 0.9);
    }
    std::printf("%s: top-1 %.3f, top-5 %.3f, mean KL %.3g, first divergence %s\n", w.c_str(), f["top1_agreement"].get<double>(),
                f["topk_agreement"].get<double>(), f["mean_kl"].get<double>(), f["first_divergence_step"].dump().c_str());
  }
}

// --draft: the prompts also decoded speculatively in the last format listed; the drafts
// kept and the tokens per pass, the same ids as plain greedy decoding, and per decoded token
// fewer round trips than a token's six (one per layer), projected per link.
TEST(BenchCli, DraftRowsReportAcceptanceTokensPerPassAndProjections) {
  test::ChildProcess a({"serve", kDemo, "--port", "0", "--layers", "0-2", "--threads", "1"});
  test::ChildProcess b({"serve", kDemo, "--port", "0", "--layers", "3-5", "--threads", "1"});
  ASSERT_TRUE(test::wait_healthy(a.url()) && test::wait_healthy(b.url()));
  const auto r = test::run_command(std::string(LARQL_BINARY) + " bench " + kDemo + " --prompt 'And the LORD said unto Moses,' --ffn '0-2=" +
                                   a.url() + ",3-5=" + b.url() + "' --steps 48 --wire f16 --json --threads 1 --links 100Mbit/20ms " +
                                   "--draft " + kDemo + "-draft");
  ASSERT_EQ(r.status, 0) << r.output;
  const json doc = json::parse(r.output);
  ASSERT_TRUE(doc["speculative"].is_object()) << doc.dump();
  const json& s = doc["speculative"];
  EXPECT_EQ(s["wire"], "f16");
  EXPECT_TRUE(s["same_ids"].get<bool>());
  EXPECT_EQ(s["tokens"], 47) << "the first token comes from the prefill";
  EXPECT_GT(s["accepted"].get<size_t>(), 0u);
  EXPECT_GT(s["tokens_per_pass"].get<double>(), 1.0);
  const double plain_trips = doc["formats"][1]["round_trips_per_token"].get<double>();
  EXPECT_DOUBLE_EQ(plain_trips, 6.0);
  EXPECT_NEAR(s["round_trips_per_token"].get<double>(), 6.0 * double(s["passes"]) / double(s["tokens"]), 1e-9);
  EXPECT_GT(s["projected_tokens_per_second"]["100Mbit_20ms"].get<double>(),
            doc["formats"][1]["projected_tokens_per_second"]["100Mbit_20ms"].get<double>());
  const auto refused = test::run_command(std::string(LARQL_BINARY) + " bench " + kDemo + " --ffn '0-5=" + a.url() + "' --draft nope 2>&1");
  EXPECT_NE(refused.output.find("--draft 'nope'"), std::string::npos) << refused.output;
}

TEST(BenchCli, GateFailsWhenAFormatLeavesTheReferenceTopK) {
  const std::string model = kDemo;
  test::ChildProcess s({"serve", model, "--port", "0", "--wire-i8", "--threads", "1"});
  ASSERT_TRUE(test::wait_healthy(s.url()));
  // f16 keeps the top-5 set on this model (measured over 150 steps); the gate examines it and passes.
  auto pass = test::run_command(std::string(LARQL_BINARY) + " bench " + model + " --prompt-ids 1 --ffn " + s.url() +
                                " --wire f16 --steps 30 --assert-topk-match 5 2>&1");
  EXPECT_EQ(pass.status, 0) << pass.output;
  EXPECT_NE(pass.output.find("f16"), std::string::npos) << pass.output;
  // top-50 with i8: the 50th place moves, and the gate fails naming the format.
  auto gate = test::run_command(std::string(LARQL_BINARY) + " bench " + model + " --prompt-ids 1 --ffn " + s.url() +
                                " --wire i8 --steps 30 --assert-topk-match 50 2>&1");
  EXPECT_EQ(gate.status, 1) << gate.output;
  EXPECT_NE(gate.output.find("i8 top-50 differs"), std::string::npos) << gate.output;
}

}  // namespace
}  // namespace larql
