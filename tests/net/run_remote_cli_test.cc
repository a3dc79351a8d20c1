// `larql run --ffn` as a user runs it, against real shard processes on the demo model: a
// layer map with replicas, keys from the flag and from LARQL_API_KEY, the --json fields,
// --timeout-ms, and the shards it must refuse (wrong hidden size, missing layers, another
// model) or only warn about (a reference server that lists no wire formats).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "model/synth.h"
#include "support/command.h"
#include "support/gated_proxy.h"
#include "support/demo_model.h"
#include "support/process.h"

namespace larql {
namespace {

using nlohmann::json;
using test::ChildProcess;

using test::kDemo;
const std::string kPrompt = "And God said,";

test::CommandResult larql(const std::string& args) {
  return test::run_command(std::string(LARQL_BINARY) + " " + args + " 2>&1");
}

json run_json(const std::string& extra) {
  const auto r = test::run_command(std::string(LARQL_BINARY) + " run " + kDemo + " --prompt '" + kPrompt +
                                   "' --steps 16 --json " + extra);
  EXPECT_EQ(r.status, 0) << r.output;
  return json::parse(r.output, nullptr, false);
}

std::string synth(const std::string& name, size_t hidden, size_t heads, uint64_t seed, DType dtype = DType::f32) {
  const auto dir = std::filesystem::temp_directory_path() / (name + "_" + std::to_string(::getpid()));
  EXPECT_TRUE(write_synthetic_checkpoint(dir.string(), {.hidden = hidden, .layers = 6, .ffn = 64, .heads = heads, .kv_heads = 2,
                                                        .vocab = 256, .context = 64, .dtype = dtype, .seed = seed})
                  .ok());
  return dir.string();
}

// A mixture-of-experts model's layers on layer-range shards that own all their experts (the
// client routes and sends each sparse layer's rows to /v1/walk-experts; Gemma 4's dense MLP
// goes to /v1/walk-ffn beside them): f32 gives the local ids; each shard's per-layer
// fingerprint covers the router and experts, so another model's shard is refused.
// Speculative decoding through two shards: the drafts are verified several rows per call,
// and the ids are plain greedy decoding's, in f32 and in f16 (each against its own wire).
TEST(RunRemoteCli, SpeculativeDecodingGivesThePlainGreedyIdsInFewerRoundTrips) {
  ChildProcess a({"serve", kDemo, "--port", "0", "--layers", "0-2", "--threads", "1"});
  ChildProcess b({"serve", kDemo, "--port", "0", "--layers", "3-5", "--threads", "1"});
  auto run = [&](const std::string& extra) {
    const auto r = test::run_command(std::string(LARQL_BINARY) + " run " + kDemo + " --prompt '" + kPrompt + "' --steps 96 " +
                                     "--ignore-eos --json --ffn '0-2=" + a.url() + ",3-5=" + b.url() + "' " + extra);
    EXPECT_EQ(r.status, 0) << r.output;
    return json::parse(r.output, nullptr, false);
  };
  for (const char* wire : {"f32", "f16"}) {
    const json plain = run(std::string("--wire ") + wire);
    // A chain of drafts, and trees of lookup's continuations (rows off the first branch).
    for (const char* drafts : {"--draft lookup", "--draft lookup --draft-max 16 --draft-branches 4"}) {
      const json spec = run(std::string("--wire ") + wire + " " + drafts);
      EXPECT_EQ(spec["generated_ids"], plain["generated_ids"]) << wire << " " << drafts;
      EXPECT_GT(spec["accepted"].get<size_t>(), 0u) << wire << " " << drafts;
      EXPECT_LT(spec["remote_calls"].get<size_t>(), plain["remote_calls"].get<size_t>()) << wire << " " << drafts;
      std::printf("%s: %zu calls plain, %zu with %s (%zu of %zu drafts kept)\n", wire, plain["remote_calls"].get<size_t>(),
                  spec["remote_calls"].get<size_t>(), drafts, spec["accepted"].get<size_t>(), spec["drafted"].get<size_t>());
    }
  }
  EXPECT_NE(larql("run " + kDemo + " --prompt-ids 1,2 --draft nope").output.find("expected lookup, lookup:N (N from 1 to 64, the longest tail matched) or the path of a draft model"), std::string::npos);
  EXPECT_NE(larql("run " + kDemo + " --prompt-ids 1,2 --draft " + kDemo + " --draft-branches 2").output.find("trees of drafts are prompt lookup's"),
            std::string::npos);
}

TEST(RunRemoteCli, MixtureOfExpertsLayersOnLayerRangeShards) {
  for (auto [family, rest] : {std::pair{"mixtral", "2"}, {"qwen3moe", "2"}, {"gemma4moe", "2-3"}}) {
    SCOPED_TRACE(family);
    const std::string model = std::string(LARQL_SOURCE_DIR) + "/tests/data/moe/" + family;
    ChildProcess a({"serve", model, "--port", "0", "--layers", "0-1", "--threads", "1"});
    ChildProcess b({"serve", model, "--port", "0", "--layers", rest, "--threads", "1"});
    auto run = [&](const std::string& extra) {
      const auto r = larql("run " + model + " --prompt-ids 2,5,6,7,40 --steps 12 --ignore-eos --json --threads 1 " + extra);
      EXPECT_EQ(r.status, 0) << r.output;
      return json::parse(r.output.substr(r.output.find('{')), nullptr, false);
    };
    const json local = run("");
    const std::string map = "'0-1=" + a.url() + "," + rest + "=" + b.url() + "'";
    for (const char* wire : {"f32", "f16"}) {
      const json remote = run("--ffn " + map + " --wire " + wire);
      ASSERT_FALSE(local.is_discarded() || remote.is_discarded());
      if (std::string(wire) == "f32") { EXPECT_EQ(remote["generated_ids"], local["generated_ids"]); }
      EXPECT_EQ(remote["generated_ids"].size(), 12u) << wire;
    }
  }
  // The other family's shard for layers 0-1 of Mixtral: same hidden size, other experts.
  ChildProcess other({"serve", std::string(LARQL_SOURCE_DIR) + "/tests/data/moe/qwen3moe", "--port", "0", "--threads", "1"});
  const auto r = larql("run " + std::string(LARQL_SOURCE_DIR) + "/tests/data/moe/mixtral --prompt-ids 2,5 --steps 2 --ffn " + other.url());
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("fingerprint"), std::string::npos) << r.output;
}

TEST(RunRemoteCli, LayerMapWithReplicasAndKeysGivesTheLocalTextAndJsonFields) {
  ChildProcess a1({"serve", kDemo, "--port", "0", "--layers", "0-2", "--threads", "1", "--api-key", "k"});
  ChildProcess a2({"serve", kDemo, "--port", "0", "--layers", "0-2", "--threads", "1", "--api-key", "k"});
  ChildProcess b({"serve", kDemo, "--port", "0", "--layers", "3-5", "--threads", "1", "--api-key", "k"});
  const json local = run_json("--threads 1");
  const std::string map = "'0-2=" + a1.url() + "|" + a2.url() + ",3-5=" + b.url() + "'";
  const json remote = run_json("--threads 1 --ffn " + map + " --wire f32 --api-key k --timeout-ms 10000");
  ASSERT_FALSE(local.is_discarded() || remote.is_discarded());
  EXPECT_EQ(remote["generated_ids"], local["generated_ids"]);
  EXPECT_EQ(remote["text"], local["text"]);
  EXPECT_EQ(local["wire"], "local");
  EXPECT_EQ(remote["wire"], "f32");
  // One call per layer per position fed: a prefill call for each layer, then one per step
  // (the last sampled token is not fed back).
  const size_t prompt = remote["prompt_ids"].size(), steps = remote["generated_ids"].size();
  EXPECT_EQ(remote["remote_calls"].get<size_t>(), 6 * (1 + steps - 1)) << remote;
  EXPECT_EQ(remote["f32_fallbacks"], 0);
  const size_t positions = prompt + steps - 1;
  EXPECT_EQ(remote["bytes_sent"].get<size_t>(), 6 * positions * 384 * 4 + remote["remote_calls"].get<size_t>() * 16) << remote;
  for (const char* key : {"remote_ms", "server_ms", "max_rss_bytes"}) EXPECT_GT(remote[key].get<double>(), 0) << key;

  // The key from LARQL_API_KEY; without any key the shards refuse the client at connect.
  const auto keyed = test::run_command("LARQL_API_KEY=k " + std::string(LARQL_BINARY) + " run " + kDemo + " --prompt '" +
                                       kPrompt + "' --steps 16 --json --threads 1 --wire f32 --ffn " + map);
  ASSERT_EQ(keyed.status, 0) << keyed.output;
  EXPECT_EQ(json::parse(keyed.output)["generated_ids"], local["generated_ids"]);
  const auto unkeyed = larql("run " + kDemo + " --prompt hi --steps 2 --ffn " + map);
  EXPECT_NE(unkeyed.status, 0);
  EXPECT_NE(unkeyed.output.find("401"), std::string::npos) << unkeyed.output;
}

TEST(RunRemoteCli, ShardsOfAnotherShapeOrModelOrCoverageAreRefused) {
  ChildProcess demo({"serve", kDemo, "--port", "0", "--layers", "0-2", "--threads", "1"});
  const std::string narrow_dir = synth("larql_cli_h64", 64, 4, 3), other_dir = synth("larql_cli_h384", 384, 6, 4);
  ChildProcess narrow({"serve", narrow_dir, "--port", "0", "--threads", "1"});
  ChildProcess other({"serve", other_dir, "--port", "0", "--threads", "1"});
  auto r = larql("run " + kDemo + " --prompt hi --steps 2 --ffn " + narrow.url());
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("shard " + narrow.url() + ": serves hidden size 64"), std::string::npos) << r.output;
  r = larql("run " + kDemo + " --prompt hi --steps 2 --ffn " + other.url());
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("shard " + other.url() + ": layer 0 fingerprint"), std::string::npos) << r.output;
  r = larql("run " + kDemo + " --prompt hi --steps 2 --ffn 0-2=" + demo.url());
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("--ffn map covers no shard for layer 3"), std::string::npos) << r.output;
  r = larql("run " + kDemo + " --prompt hi --steps 2 --ffn 0-5=" + demo.url());
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("shard " + demo.url() + ": serves layers 0-2 but is asked for 0-5"), std::string::npos) << r.output;
  std::filesystem::remove_all(narrow_dir);
  std::filesystem::remove_all(other_dir);
}

TEST(RunRemoteCli, Bf16DotShardsEqualALocalBf16DotRunAndExactClientsRefuseThem) {
  const std::string dir = synth("larql_cli_bf16", 64, 4, 5, DType::bf16);
  ChildProcess shard({"serve", dir, "--port", "0", "--threads", "1", "--arithmetic", "bf16-dot"});
  const std::string run = "run " + dir + " --prompt-ids 1,2,3,4,5 --steps 12 --json --threads 1";
  const auto local = larql(run + " --arithmetic bf16-dot");
  const auto remote = larql(run + " --arithmetic bf16-dot --wire f32 --ffn " + shard.url());
  ASSERT_EQ(local.status, 0) << local.output;
  ASSERT_EQ(remote.status, 0) << remote.output;
  EXPECT_EQ(json::parse(remote.output)["generated_ids"], json::parse(local.output)["generated_ids"]);

  // A client computing exactly (the default) refuses it; LARQL_ARITHMETIC chooses too.
  const auto exact = larql(run + " --ffn " + shard.url());
  EXPECT_NE(exact.status, 0);
  EXPECT_NE(exact.output.find("shard " + shard.url() + ": computes the FFN with the bf16-dot arithmetic, this client with f32"),
            std::string::npos)
      << exact.output;
  const auto from_env = test::run_command("LARQL_ARITHMETIC=bf16-dot " + std::string(LARQL_BINARY) + " " + run +
                                          " --wire f32 --ffn " + shard.url() + " 2>&1");
  ASSERT_EQ(from_env.status, 0) << from_env.output;
  EXPECT_EQ(json::parse(from_env.output)["generated_ids"], json::parse(local.output)["generated_ids"]);
  const auto unknown = larql(run + " --arithmetic bf16");
  EXPECT_NE(unknown.status, 0);
  EXPECT_NE(unknown.output.find("--arithmetic takes f32 or bf16-dot, not \"bf16\""), std::string::npos) << unknown.output;
  std::filesystem::remove_all(dir);
}

TEST(RunRemoteCli, AServerThatListsNoWireFormatsGetsF32AndAWarning) {
  ChildProcess shard({"serve", kDemo, "--port", "0", "--threads", "1"});
  auto without_wire = [](std::string stats) {
    auto j = json::parse(stats);
    j.erase("wire");
    return j.dump();
  };
  test::GatedProxy reference_like(shard.url(), without_wire, /*open=*/true);
  const auto r = larql("run " + kDemo + " --prompt hi --steps 4 --json --threads 1 --wire f16 --ffn " + reference_like.url());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("does not list its wire formats; sending f32 requests"), std::string::npos) << r.output;
  const auto j = json::parse(r.output.substr(r.output.find('{')));
  // f32 requests, although f16 was asked for: 16 header bytes and 384 f32 values a row.
  const size_t positions = j["prompt_ids"].size() + j["generated_ids"].size() - 1;
  EXPECT_EQ(j["bytes_sent"].get<size_t>(), 6 * positions * 384 * 4 + j["remote_calls"].get<size_t>() * 16) << j;
}

TEST(RunRemoteCli, AShardSlowerThanTimeoutMsIsAnErrorNamingTheLayer) {
  ChildProcess shard({"serve", kDemo, "--port", "0", "--threads", "1"});
  test::GatedProxy slow(shard.url());
  const auto r = larql("run " + kDemo + " --prompt hi --steps 2 --timeout-ms 300 --ffn " + slow.url());
  slow.open();
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("every replica for layer 0 failed: shard " + slow.url() + ": layer 0: reading the response"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("no progress within 300 ms"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace larql
