// Layer-range sessions over real shard processes on the demo model (PROTOCOL §13): `larql run
// --remote-layers` gives a local run's ids over f32 in two round trips a pass, with drafts
// too, beside FFN mode on the same shards; a replica killed in the middle of an answer costs
// the answer nothing (its sessions are replayed on the other replica, every logit equal); a
// map that leaves layers uncovered, or a shard without --sessions, is refused by name.
#include <gtest/gtest.h>

#include <httplib.h>

#include <nlohmann/json.hpp>
#include <filesystem>
#include <fstream>
#include <functional>
#include <atomic>
#include <map>
#include <memory>
#include <thread>

#include "infer/local_ffn.h"
#include "infer/sampler.h"
#include "infer/transformer.h"
#include "model/loader.h"
#include "model/synth.h"
#include "net/remote_layers.h"
#include "support/command.h"
#include "support/demo_model.h"
#include "support/eventually.h"
#include "support/process.h"
#include "wire/session_codec.h"
#include "wire/wire_config.h"

namespace larql {
namespace {

using nlohmann::json;
using test::ChildProcess;
using test::kDemo;

ChildProcess session_shard(const std::string& layers) {
  return ChildProcess({"serve", kDemo, "--port", "0", "--layers", layers, "--threads", "1", "--sessions"});
}

json run_json(const std::string& extra) {
  const auto r = test::run_command(std::string(LARQL_BINARY) + " run " + kDemo +
                                   " --prompt 'Once upon a time' --steps 48 --ignore-eos --json " + extra + " 2>&1");
  EXPECT_EQ(r.status, 0) << r.output;
  const size_t brace = r.output.find('{');
  if (brace == std::string::npos) return json::object();
  const json j = json::parse(r.output.substr(brace), nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << r.output;
  return j;
}

size_t open_sessions(const ChildProcess& shard) {
  httplib::Client c("127.0.0.1", shard.port());
  auto r = c.Get("/v1/stats");
  if (!r || r->status != 200) return 0;
  return json::parse(r->body)["sessions"]["open"].get<size_t>();
}

TEST(SessionsGrid, RunOverTwoRangesGivesTheLocalIdsInTwoRoundTripsAPass) {
  ChildProcess a = session_shard("0-2"), b = session_shard("3-5");
  const std::string map = "\"0-2=" + a.url() + ",3-5=" + b.url() + "\"";
  const json local = run_json("");
  const json f32 = run_json("--remote-layers " + map + " --wire f32");
  EXPECT_EQ(f32["generated_ids"], local["generated_ids"]);
  EXPECT_EQ(f32["round_trips_per_pass"].get<double>(), 2.0);
  EXPECT_EQ(f32["replays"], 0);
  const json drafted = run_json("--remote-layers " + map + " --wire f32 --draft lookup");
  EXPECT_EQ(drafted["generated_ids"], local["generated_ids"]);
  EXPECT_GT(drafted["accepted"].get<size_t>(), 0u);  // drafts kept: several tokens a pass
  EXPECT_LT(drafted["passes"].get<size_t>(), f32["passes"].get<size_t>());
  // f16 runs (its ids may differ from f32's); a session shard still serves FFN mode.
  const json f16 = run_json("--remote-layers " + map);
  EXPECT_EQ(f16["generated_ids"].size(), 48u);
  // Over q8 the last range answers in f16 (its rows go straight into the logits): against
  // f16 throughout, only the first range's rows are smaller, one a prompt token and one a
  // token after the first.
  const json q8 = run_json("--remote-layers " + map + " --wire q8");
  const size_t H = 384, row_f16 = 2 * H, row_q8 = H / 32 * 34, first_range_rows = q8["prompt_ids"].size() + 47;
  EXPECT_EQ(f16["bytes_received"].get<size_t>() - q8["bytes_received"].get<size_t>(), first_range_rows * (row_f16 - row_q8));
  EXPECT_EQ(run_json("--ffn " + map + " --wire f32")["generated_ids"], local["generated_ids"]);
  // larql bench over sessions: f32 exact against the local run, two round trips a token.
  const auto bench = test::run_command(std::string(LARQL_BINARY) + " bench " + kDemo + " --remote-layers " + map +
                                       " --local --prompt 'And God said,' --steps 8 --wire f32,f16 --json 2>&1");
  ASSERT_EQ(bench.status, 0) << bench.output;
  const json report = json::parse(bench.output.substr(bench.output.find('{')));
  EXPECT_TRUE(report["remote_f32_exact"].get<bool>());
  for (const auto& f : report["formats"]) EXPECT_EQ(f["round_trips_per_token"].get<double>(), 2.0) << f.dump();
  // Every session is closed when the run ends.
  EXPECT_EQ(open_sessions(a), 0u);
  EXPECT_EQ(open_sessions(b), 0u);
}

// Every family's layers over two session shards give the local ids over f32: sliding
// windows (Gemma 3), per-layer inputs and KV sharing (Gemma 4 E: the shards hold the
// embedding and per-layer tables), routed experts on the shard (Qwen3-MoE), sinks, YaRN and
// MXFP4-free GPT-OSS.
TEST(SessionsGrid, EveryFamilyOverTwoSessionShardsGivesTheLocalIds) {
  struct Case {
    SynthSpec spec;
    std::string cut;  // the first shard's layers
  };
  const std::vector<Case> cases{
      {{.family = "gemma3", .hidden = 64, .layers = 4, .ffn = 96, .heads = 4, .kv_heads = 2, .head_dim = 16, .sliding_window = 4,
        .vocab = 256, .context = 256, .dtype = DType::f32, .seed = 5},
       "0-1"},
      {{.family = "gemma4", .hidden = 64, .layers = 6, .ffn = 96, .heads = 2, .kv_heads = 1, .head_dim = 16, .sliding_window = 4,
        .vocab = 256, .context = 256, .dtype = DType::f32, .seed = 5, .ple_dim = 8, .kv_shared = 2, .sliding_period = 2},
       "0-1"},
      {{.family = "qwen3moe", .hidden = 64, .layers = 4, .ffn = 96, .heads = 4, .kv_heads = 2, .vocab = 256, .context = 256,
        .dtype = DType::f32, .seed = 5, .experts = 4, .experts_used = 2, .expert_ffn = 32},
       "0-2"},
      {{.family = "gpt-oss", .hidden = 64, .layers = 4, .ffn = 96, .heads = 4, .kv_heads = 2, .head_dim = 16, .vocab = 256,
        .context = 256, .dtype = DType::f32, .seed = 5, .experts = 4, .experts_used = 2, .expert_ffn = 32},
       "0-0"},
  };
  for (const Case& c : cases) {
    const auto dir = std::filesystem::temp_directory_path() / ("larql_sessions_" + c.spec.family + "_" + std::to_string(::getpid()));
    ASSERT_TRUE(write_synthetic_checkpoint(dir.string(), c.spec).ok());
    const std::string rest = std::to_string(std::stoul(c.cut.substr(2)) + 1) + "-" + std::to_string(c.spec.layers - 1);
    ChildProcess a({"serve", dir.string(), "--port", "0", "--layers", c.cut, "--threads", "1", "--sessions"});
    ChildProcess b({"serve", dir.string(), "--port", "0", "--layers", rest, "--threads", "1", "--sessions"});
    auto run = [&](const std::string& extra) {
      const auto r = test::run_command(std::string(LARQL_BINARY) + " run " + dir.string() +
                                       " --prompt-ids 1,5,9,13,2,7,30,4,11 --steps 12 --ignore-eos --json --threads 1 " + extra + " 2>&1");
      EXPECT_EQ(r.status, 0) << r.output;
      return json::parse(r.output.substr(r.output.find('{')), nullptr, false);
    };
    const json local = run("");
    const json remote = run("--wire f32 --remote-layers \"" + c.cut + "=" + a.url() + "," + rest + "=" + b.url() + "\"");
    EXPECT_EQ(local["generated_ids"].size(), 12u) << c.spec.family;
    EXPECT_EQ(remote["generated_ids"], local["generated_ids"]) << c.spec.family;
    EXPECT_EQ(remote["round_trips_per_pass"].get<double>(), 2.0) << c.spec.family;
    std::filesystem::remove_all(dir);
  }
}

TEST(SessionsGrid, MapsThatLeaveLayersUncoveredOrNameFfnOnlyShardsAreRefused) {
  ChildProcess a = session_shard("0-2");
  ChildProcess ffn_only({"serve", kDemo, "--port", "0", "--layers", "3-5", "--threads", "1"});
  auto run = [](const std::string& map) {
    return test::run_command(std::string(LARQL_BINARY) + " run " + kDemo + " --prompt-ids 1,2 --steps 2 --remote-layers \"" + map +
                             "\" 2>&1");
  };
  const auto gap = run("0-2=" + a.url());
  EXPECT_NE(gap.status, 0);
  EXPECT_NE(gap.output.find("leaves layers 3-5 uncovered"), std::string::npos) << gap.output;
  const auto plain = run("0-2=" + a.url() + ",3-5=" + ffn_only.url());
  EXPECT_NE(plain.status, 0);
  EXPECT_NE(plain.output.find("--sessions"), std::string::npos) << plain.output;
  const auto trees = test::run_command(std::string(LARQL_BINARY) + " run " + kDemo + " --prompt-ids 1,2 --steps 2 --draft lookup " +
                                       "--draft-branches 3 --remote-layers \"0-5=" + a.url() + "\" 2>&1");
  EXPECT_NE(trees.status, 0);
  EXPECT_NE(trees.output.find("--draft-branches 3"), std::string::npos) << trees.output;
}

// Resident memory of a process, bytes.
size_t rss_bytes(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);)
    if (line.starts_with("VmRSS:")) return std::stoul(line.substr(6)) * 1024;
  return 0;
}

// A shard's KV memory is bounded by its budget: sessions opened until the first 503, each
// filled to its positions, keep its resident memory under what it held before plus the
// budget plus 10%; after they are deleted its KV bytes are 0.
TEST(SessionsGrid, SessionsFilledToTheBudgetStayWithinItAndGiveItBack) {
  constexpr size_t kBudget = 8u << 20, kPositions = 256;
  ChildProcess shard({"serve", kDemo, "--port", "0", "--layers", "0-5", "--threads", "1", "--sessions", "--session-kv-bytes",
                      std::to_string(kBudget)});
  httplib::Client c("127.0.0.1", shard.port());
  c.set_read_timeout(60);
  // Warm: the weights paged in by one session's step, then the baseline.
  auto fill = [&](const std::string& id) {
    for (uint32_t start = 0, step = 1; start < kPositions; start += 64, ++step) {
      const uint32_t rows = 64;
      wire::SessionStep st{*wire::parse_session_id(id), step, start, rows, rows};
      std::vector<uint32_t> tokens(rows, 7);
      std::vector<float> x(rows * test::kDemoHidden, 0.25f);
      std::string body;
      EXPECT_TRUE(wire::encode_walk_layers_request(wire::Encoding::f32, {&st, 1}, tokens, test::kDemoHidden, x, body).ok());
      auto r = c.Post("/v1/walk-layers", body, "application/x-larql-ffn");
      ASSERT_TRUE(r && r->status == 200) << (r ? r->body : "no answer");
    }
  };
  auto open = [&] { return c.Post("/v1/sessions", json{{"max_positions", kPositions}}.dump(), "application/json"); };
  auto warm = open();
  ASSERT_TRUE(warm && warm->status == 201);
  const std::string warm_id = json::parse(warm->body)["session"].get<std::string>();
  fill(warm_id);
  ASSERT_EQ(c.Delete("/v1/sessions/" + warm_id)->status, 204);
  const size_t before = rss_bytes(shard.pid());
  std::vector<std::string> ids;
  for (int i = 0; i < 1000; ++i) {  // bounded: the budget runs out long before
    auto r = open();
    ASSERT_TRUE(r);
    if (r->status == 503) break;
    ASSERT_EQ(r->status, 201) << r->body;
    ids.push_back(json::parse(r->body)["session"].get<std::string>());
    EXPECT_LE(json::parse(r->body)["reserved_bytes"].get<size_t>() * ids.size(), kBudget);
  }
  ASSERT_GT(ids.size(), 1u);
  for (const auto& id : ids) fill(id);
  const size_t full = rss_bytes(shard.pid());
  std::printf("%zu sessions of %zu positions: resident %.1f MiB, was %.1f MiB; budget %.1f MiB\n", ids.size(), kPositions,
              double(full) / (1 << 20), double(before) / (1 << 20), double(kBudget) / (1 << 20));
#if !defined(__SANITIZE_ADDRESS__)  // AddressSanitizer's quarantine holds freed memory: resident size is not judged there
  EXPECT_LE(double(full), (double(before) + double(kBudget)) * 1.10);
#endif
  auto stats = json::parse(c.Get("/v1/stats")->body)["sessions"];
  EXPECT_GT(stats["kv_bytes"].get<size_t>(), 0u);
  EXPECT_LE(stats["kv_bytes"].get<size_t>(), stats["kv_reserved_bytes"].get<size_t>());
  EXPECT_LE(stats["kv_reserved_bytes"].get<size_t>(), kBudget);
  for (const auto& id : ids) EXPECT_EQ(c.Delete("/v1/sessions/" + id)->status, 204);
  stats = json::parse(c.Get("/v1/stats")->body)["sessions"];
  EXPECT_EQ(stats["kv_bytes"], 0);
  EXPECT_EQ(stats["kv_reserved_bytes"], 0);
  EXPECT_EQ(stats["open"], 0);
}

// Greedy decoding of 40 tokens through `remote` beside a local transformer, every logit
// equal; before the 21st, `kill` ends the replica that holds the session (or its part).
void expect_every_logit_through_a_kill(const Model& model, RemoteLayers& remote, const std::function<void()>& kill) {
  ThreadPool pool(1);
  LocalFfn ffn(model, pool);
  Transformer reference(model, ffn, pool), client(model, ffn, pool);
  ASSERT_TRUE(client.set_layer_ranges(remote.ranges()).ok());
  std::vector<int> ids{1, 15, 27, 300, 41, 9};
  std::vector<float> expected, got;
  ASSERT_TRUE(reference.forward(ids, 0, expected).ok());
  ASSERT_TRUE(client.forward(ids, 0, got).ok());
  ASSERT_EQ(got, expected);
  for (size_t step = 0; step < 40; ++step) {
    if (step == 20) kill();
    ids.push_back(argmax(expected));
    const size_t pos = ids.size() - 1;
    ASSERT_TRUE(reference.forward({&ids.back(), 1}, pos, expected).ok());
    auto s = client.forward({&ids.back(), 1}, pos, got);
    ASSERT_TRUE(s.ok()) << s.error().message;
    ASSERT_EQ(got, expected) << "step " << step;
  }
}

TEST(SessionsGrid, AReplicaKilledInTheMiddleOfAnAnswerCostsTheAnswerNothing) {
  auto model = load_model(kDemo);
  ASSERT_TRUE(model.ok());
  ChildProcess a1 = session_shard("0-2"), a2 = session_shard("0-2"), b = session_shard("3-5");
  auto wire = wire::client_wire("f32", wire::process_env());
  ASSERT_TRUE(wire.ok());
  auto remote = RemoteLayers::connect(*model, {"0-2=" + a1.url() + "|" + a2.url() + ",3-5=" + b.url(), *wire}, nullptr);
  ASSERT_TRUE(remote.ok()) << remote.error().message;
  expect_every_logit_through_a_kill(*model, **remote, [&] {  // the replica of layers 0-2 holding the session
    ChildProcess& holder = open_sessions(a1) == 1 ? a1 : a2;
    ASSERT_EQ(open_sessions(holder), 1u);
    holder.kill_now();
  });
  EXPECT_EQ((*remote)->stats().replays, 1u);
}

TEST(SessionsGrid, TheApisBatchOverSessionsGivesEachAnswerItsLocalText) {
  ChildProcess a = session_shard("0-2"), b = session_shard("3-5");
  ChildProcess api({"api", kDemo, "--port", "0", "--parallel", "4", "--threads", "1", "--wire", "f32", "--remote-layers",
                    "0-2=" + a.url() + ",3-5=" + b.url()});
  const std::vector<std::string> prompts{"In the beginning", "And God said,", "Once upon a time", "The LORD is my"};
  std::vector<std::string> texts(prompts.size());
  std::vector<std::thread> clients;
  for (size_t i = 0; i < prompts.size(); ++i)
    clients.emplace_back([&, i] {
      httplib::Client c("127.0.0.1", api.port());
      c.set_read_timeout(60);
      auto r = c.Post("/v1/completions", json{{"prompt", prompts[i]}, {"max_tokens", 16}, {"temperature", 0}}.dump(), "application/json");
      if (r && r->status == 200) texts[i] = json::parse(r->body)["choices"][0]["text"].get<std::string>();
    });
  for (auto& t : clients) t.join();
  for (size_t i = 0; i < prompts.size(); ++i) {
    const auto local = test::run_command(std::string(LARQL_BINARY) + " run " + kDemo + " --prompt '" + prompts[i] +
                                         "' --steps 16 --json --threads 1");
    ASSERT_EQ(local.status, 0) << local.output;
    EXPECT_FALSE(texts[i].empty()) << prompts[i];
    EXPECT_EQ(texts[i], json::parse(local.output)["text"].get<std::string>()) << prompts[i];
  }
}

// A shard's counter from its /metrics.
double shard_metric(const ChildProcess& shard, const std::string& name) {
  httplib::Client c("127.0.0.1", shard.port());
  const std::string text = c.Get("/metrics")->body;
  const size_t at = text.find("\n" + name + " ");
  return at == std::string::npos ? -1 : std::stod(text.substr(at + name.size() + 2));
}

// n > 1 answers to one prompt fork the first one's sessions after its prefill (no values on
// the wire): three greedy choices run the prompt's rows once, open one session and fork two,
// and each equals the local text.
TEST(SessionsGrid, SeveralChoicesOfOnePromptForkOneSession) {
  ChildProcess a = session_shard("0-2"), b = session_shard("3-5");
  // (Without the prefix cache, which would continue the second request from the first's.)
  ChildProcess api({"api", kDemo, "--port", "0", "--parallel", "4", "--threads", "1", "--wire", "f32", "--remote-layers",
                    "0-2=" + a.url() + ",3-5=" + b.url(), "--cache-bytes", "0"});
  httplib::Client c("127.0.0.1", api.port());
  c.set_read_timeout(60);
  json usage;
  auto ask = [&](int n) {
    auto r = c.Post("/v1/completions", json{{"prompt", "And God said,"}, {"max_tokens", 16}, {"temperature", 0}, {"n", n}}.dump(),
                    "application/json");
    EXPECT_TRUE(r && r->status == 200) << (r ? r->body : "no answer");
    if (!r || r->status != 200) return json::array();
    usage = json::parse(r->body)["usage"];
    return json::parse(r->body)["choices"];
  };
  auto rows = [&] { return shard_metric(a, "larql_shard_sessions_rows_total"); };
  auto opened = [&] { return shard_metric(a, "larql_shard_sessions_opened_total"); };
  const double rows0 = rows(), opened0 = opened();
  const json one = ask(1);
  const double rows1 = rows(), opened1 = opened();
  const json three = ask(3);
  const double rows3 = rows(), opened3 = opened();
  ASSERT_EQ(one.size(), 1u);
  ASSERT_EQ(three.size(), 3u);
  for (const auto& choice : three) EXPECT_EQ(choice["text"], one[0]["text"]);
  const auto local = test::run_command(std::string(LARQL_BINARY) + " run " + kDemo + " --prompt 'And God said,' --steps 16 --json --threads 1");
  EXPECT_EQ(one[0]["text"], json::parse(local.output)["text"]);
  EXPECT_EQ(opened1 - opened0, 1);
  EXPECT_EQ(opened3 - opened1, 3);  // one opened, two forked
  // The prompt's rows run once for the three; each choice's decode rows its own.
  const double prompt = usage["prompt_tokens"].get<double>(), decode = usage["completion_tokens"].get<double>() / 3 - 1;
  EXPECT_EQ(rows1 - rows0, prompt + decode);
  EXPECT_EQ(rows3 - rows1, prompt + 3 * decode);
}

// n > 1 choices on a shard with room for two sessions: the third choice's fork finds it
// full after the prefill, waits outside the batch's steps while the first two run to their
// end, then forks the first's prefix; all three equal the local text.
TEST(SessionsGrid, AChoiceWhoseForkFindsTheShardFullWaitsForTheOthers) {
  ChildProcess shard({"serve", kDemo, "--port", "0", "--layers", "0-5", "--threads", "1", "--sessions", "--max-sessions", "2"});
  ChildProcess api({"api", kDemo, "--port", "0", "--parallel", "4", "--threads", "1", "--wire", "f32", "--cache-bytes", "0",
                    "--session-wait-s", "20", "--remote-layers", "0-5=" + shard.url()});
  httplib::Client c("127.0.0.1", api.port());
  c.set_read_timeout(60);
  auto r = c.Post("/v1/completions", json{{"prompt", "And God said,"}, {"max_tokens", 16}, {"temperature", 0}, {"n", 3}}.dump(),
                  "application/json");
  ASSERT_TRUE(r && r->status == 200) << (r ? r->body : "no answer");
  const auto local = test::run_command(std::string(LARQL_BINARY) + " run " + kDemo + " --prompt 'And God said,' --steps 16 --json --threads 1");
  ASSERT_EQ(local.status, 0) << local.output;
  const json choices = json::parse(r->body)["choices"];
  ASSERT_EQ(choices.size(), 3u);
  for (const auto& choice : choices) EXPECT_EQ(choice["text"], json::parse(local.output)["text"]) << choice["index"];
  EXPECT_EQ(shard_metric(shard, "larql_shard_sessions_opened_total"), 3);  // one opened, two forks (a refusal is not an open)
}

// The prompt prefix cache over sessions: a turn that resends the last one continues it on
// the shards by forking the kept sessions (only its new rows go over the wire), with the
// text and log-probabilities of a local server without the cache; once the shards have let
// the kept sessions expire, the next turn is rebuilt there and still the same.
TEST(SessionsGrid, ACachedPrefixIsForkedOnTheShardsAndAnExpiredOneRebuilt) {
  ChildProcess a({"serve", kDemo, "--port", "0", "--layers", "0-2", "--threads", "1", "--sessions", "--session-idle-s", "2"});
  ChildProcess b({"serve", kDemo, "--port", "0", "--layers", "3-5", "--threads", "1", "--sessions", "--session-idle-s", "2"});
  ChildProcess api({"api", kDemo, "--port", "0", "--threads", "1", "--wire", "f32", "--remote-layers", "0-2=" + a.url() + ",3-5=" + b.url()});
  ChildProcess local({"api", kDemo, "--port", "0", "--threads", "1", "--cache-bytes", "0"});
  auto ask = [](const ChildProcess& server, const std::string& prompt) {
    httplib::Client c("127.0.0.1", server.port());
    c.set_read_timeout(60);
    auto r = c.Post("/v1/completions", json{{"prompt", prompt}, {"max_tokens", 12}, {"temperature", 0}, {"logprobs", 2}}.dump(),
                    "application/json");
    EXPECT_TRUE(r && r->status == 200) << (r ? r->body : "no answer");
    return r && r->status == 200 ? json::parse(r->body) : json::object();
  };
  auto rows = [&] { return shard_metric(a, "larql_shard_sessions_rows_total"); };
  std::string prompt = "And God said, Let there be light: and there was light.";
  for (int turn = 0; turn < 4; ++turn) {
    if (turn == 3) {  // the kept sessions expire on the shards
      ASSERT_TRUE(test::eventually([&] { return open_sessions(a) == 0 && open_sessions(b) == 0; })) << open_sessions(a);
    }
    const double rows_before = rows();
    const json remote = ask(api, prompt), plain = ask(local, prompt);
    ASSERT_TRUE(remote.contains("choices") && plain.contains("choices"));
    EXPECT_EQ(remote["choices"], plain["choices"]) << "turn " << turn << ": text and log-probabilities as a local run's";
    const size_t cached = remote["usage"]["prompt_tokens_details"]["cached_tokens"].get<size_t>();
    const double prompt_tokens = remote["usage"]["prompt_tokens"].get<double>();
    if (turn == 1 || turn == 2) {
      EXPECT_GT(cached, 12u) << "turn " << turn;
      EXPECT_LT(rows() - rows_before, prompt_tokens) << "turn " << turn << ": only the new rows were sent";
    }
    prompt += remote["choices"][0]["text"].get<std::string>() + " And the evening and the morning were the first day.";
  }
}

// Through a router beside the shards: one round trip a token, the local ids over f32; the
// replica holding a running answer's part killed in the middle of it: the router answers
// 410 session_lost, the client replays on the live replica, and every logit is the local one.
TEST(SessionsGrid, ThroughARouterOneRoundTripATokenAndAKilledReplicaIsReplayed) {
  auto model = load_model(kDemo);
  ASSERT_TRUE(model.ok());
  ChildProcess a1 = session_shard("0-2"), a2 = session_shard("0-2"), b1 = session_shard("3-5"), b2 = session_shard("3-5");
  ChildProcess router({"router", "--port", "0", "--shards",
                       "0-2=" + a1.url() + "|" + a2.url() + ",3-5=" + b1.url() + "|" + b2.url()});
  const json local = run_json("");
  const json through = run_json("--remote-layers " + router.url() + " --wire f32");
  EXPECT_EQ(through["generated_ids"], local["generated_ids"]);
  EXPECT_EQ(through["round_trips_per_pass"].get<double>(), 1.0);
  // FFN mode through the same router still works beside it.
  EXPECT_EQ(run_json("--ffn " + router.url() + " --wire f32")["generated_ids"], local["generated_ids"]);

  auto wire = wire::client_wire("f32", wire::process_env());
  auto remote = RemoteLayers::connect(*model, {router.url(), *wire}, nullptr);
  ASSERT_TRUE(remote.ok()) << remote.error().message;
  expect_every_logit_through_a_kill(*model, **remote, [&] {  // the replica of layers 3-5 holding the session's part
    ChildProcess& holder = open_sessions(b1) == 1 ? b1 : b2;
    ASSERT_EQ(open_sessions(holder), 1u);
    holder.kill_now();
  });
  EXPECT_EQ((*remote)->stats().replays, 1u);
  EXPECT_EQ((*remote)->stats().round_trips, 41u + 1u + 1u);  // one a pass, and the replay's one
}

// A full replica (503) is not the range's last word on an open: the router places the
// session on another replica of the range, and answers 503 with Retry-After only when every
// replica is full.
TEST(SessionsGrid, ARouterOpensOnAnotherReplicaWhenOneIsFull) {
  auto shard = [](const std::string& layers) {
    return ChildProcess({"serve", kDemo, "--port", "0", "--layers", layers, "--threads", "1", "--sessions", "--max-sessions", "1"});
  };
  ChildProcess a1 = shard("0-2"), a2 = shard("0-2"), b1 = shard("3-5"), b2 = shard("3-5");
  ChildProcess router({"router", "--port", "0", "--shards", "0-2=" + a1.url() + "|" + a2.url() + ",3-5=" + b1.url() + "|" + b2.url()});
  const std::string open_body = json{{"max_positions", 16}}.dump();
  httplib::Client direct("127.0.0.1", a1.port()), r("127.0.0.1", router.port());
  auto held = direct.Post("/v1/sessions", open_body, "application/json");  // a1 full, unknown to the router's count
  ASSERT_TRUE(held && held->status == 201);
  auto first = r.Post("/v1/sessions", open_body, "application/json");
  ASSERT_TRUE(first);
  EXPECT_EQ(first->status, 201) << first->body;
  EXPECT_EQ(open_sessions(a2), 1u);
  auto second = r.Post("/v1/sessions", open_body, "application/json");  // both replicas of 0-2 full now
  ASSERT_TRUE(second);
  EXPECT_EQ(second->status, 503) << second->body;
  EXPECT_EQ(json::parse(second->body, nullptr, false).value("code", ""), "overloaded");
  EXPECT_GE(std::atoi(second->get_header_value("Retry-After").c_str()), 1);
  EXPECT_EQ(open_sessions(b1) + open_sessions(b2), 1u);  // the refused open's other part closed again
}

// An open that finds every replica full waits for room (polling at the shard's Retry-After)
// rather than failing the answer: here the shard's only slot is busy for longer than a few
// Retry-Afters, then freed.
TEST(SessionsGrid, AnOpenWaitsForAFullShardToMakeRoom) {
  ChildProcess shard({"serve", kDemo, "--port", "0", "--layers", "0-5", "--threads", "1", "--sessions", "--max-sessions", "1",
                      "--session-idle-s", "1"});
  httplib::Client c("127.0.0.1", shard.port());
  auto held = c.Post("/v1/sessions", json{{"max_positions", 64}}.dump(), "application/json");
  ASSERT_TRUE(held && held->status == 201);
  const std::string id = json::parse(held->body)["session"].get<std::string>();
  std::atomic<bool> refused{false};
  std::thread busy([&] {  // steps every 0.2 s for 4 s: never idle, so every Retry-After is at most 1 s
    httplib::Client own("127.0.0.1", shard.port());
    for (uint32_t step = 1; step <= 20; ++step) {
      const wire::SessionStep st{*wire::parse_session_id(id), step, step - 1, 1, 1};
      std::vector<uint32_t> tokens{5};
      std::vector<float> x(test::kDemoHidden, 0.125f);
      std::string body;
      EXPECT_TRUE(wire::encode_walk_layers_request(wire::Encoding::f32, {&st, 1}, tokens, test::kDemoHidden, x, body).ok());
      auto r = own.Post("/v1/walk-layers", body, "application/x-larql-ffn");
      EXPECT_TRUE(r && r->status == 200);
      if (!refused) {
        auto other = own.Post("/v1/sessions", json{{"max_positions", 8}}.dump(), "application/json");
        refused = other && other->status == 503;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the slot's use, not a synchronisation
    }
    auto deleted = own.Delete("/v1/sessions/" + id);
    EXPECT_TRUE(deleted && deleted->status == 204);
  });
  const json through = run_json("--remote-layers 0-5=" + shard.url() + " --wire f32");
  busy.join();
  EXPECT_TRUE(refused);
  EXPECT_EQ(through["generated_ids"], run_json("")["generated_ids"]);
  EXPECT_EQ(through["replays"], 0);
}

// The API over a full shard: a new answer waits for room, and after --session-wait-s fails
// alone with a 503 that says why; once the shard has room (the session holding it deleted),
// answers start, and an ended answer's session makes room for the next one before it opens.
TEST(SessionsGrid, TheApisNewAnswerWaitsForRoomAndFailsAloneWhenNoneComes) {
  ChildProcess shard({"serve", kDemo, "--port", "0", "--layers", "0-5", "--threads", "1", "--sessions", "--max-sessions", "1"});
  ChildProcess api({"api", kDemo, "--port", "0", "--threads", "1", "--wire", "f32", "--cache-bytes", "0", "--session-wait-s", "1",
                    "--remote-layers", "0-5=" + shard.url()});
  httplib::Client c("127.0.0.1", shard.port()), client("127.0.0.1", api.port());
  client.set_read_timeout(60);
  auto held = c.Post("/v1/sessions", json{{"max_positions", 64}}.dump(), "application/json");
  ASSERT_TRUE(held && held->status == 201);
  const std::string body = json{{"prompt", "And God said,"}, {"max_tokens", 12}, {"temperature", 0}}.dump();
  auto refused = client.Post("/v1/completions", body, "application/json");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 503) << refused->body;
  EXPECT_NE(refused->body.find("waited 1 s for room"), std::string::npos) << refused->body;
  EXPECT_NE(refused->body.find("every replica is full"), std::string::npos) << refused->body;

  auto deleted = c.Delete("/v1/sessions/" + json::parse(held->body)["session"].get<std::string>());
  ASSERT_TRUE(deleted && deleted->status == 204);
  const auto local = test::run_command(std::string(LARQL_BINARY) + " run " + kDemo + " --prompt 'And God said,' --steps 12 --json --threads 1");
  ASSERT_EQ(local.status, 0) << local.output;
  for (int answer = 0; answer < 2; ++answer) {  // the second opens where the first's session was
    auto r = client.Post("/v1/completions", body, "application/json");
    ASSERT_TRUE(r && r->status == 200) << (r ? r->body : "no answer");
    EXPECT_EQ(json::parse(r->body)["choices"][0]["text"], json::parse(local.output)["text"]) << "answer " << answer;
  }
}

// Shards started beside a router may still be loading: a range none of whose replicas
// answers yet, where the others serve sessions, is waited for (--wait-for-shards-s), then
// named; it is not taken for a gap in the map. With no shard answering at all, the router
// starts and decides once they answer.
TEST(SessionsGrid, ARouterWaitsForARangeWhoseShardsAreStillStarting) {
  ChildProcess a = session_shard("0-2");
  auto b = std::make_unique<ChildProcess>(std::vector<std::string>{"serve", kDemo, "--port", "0", "--layers", "3-5", "--threads", "1", "--sessions"});
  const std::string b_port = std::to_string(b->port()), shards = "0-2=" + a.url() + ",3-5=" + b->url();
  b.reset();  // stopped: its port refuses connections
  const auto refused = test::run_command(std::string(LARQL_BINARY) + " router --port 0 --shards " + shards + " --wait-for-shards-s 0.5 2>&1");
  EXPECT_EQ(refused.status, 2) << refused.output;
  EXPECT_NE(refused.output.find("no replica of layers 3-5"), std::string::npos) << refused.output;
  EXPECT_EQ(refused.output.find("uncovered"), std::string::npos) << refused.output;

  std::unique_ptr<ChildProcess> router;
  std::thread starting([&] {
    try {
      router = std::make_unique<ChildProcess>(std::vector<std::string>{"router", "--port", "0", "--shards", shards});
    } catch (const std::exception& e) {
      ADD_FAILURE() << "the router did not start: " << e.what();
    }
  });
  b = std::make_unique<ChildProcess>(std::vector<std::string>{"serve", kDemo, "--port", b_port, "--layers", "3-5", "--threads", "1", "--sessions"});
  starting.join();
  ASSERT_TRUE(router);
  const json local = run_json("");
  const json through = run_json("--remote-layers " + router->url() + " --wire f32");
  EXPECT_EQ(through["generated_ids"], local["generated_ids"]);
  EXPECT_EQ(through["round_trips_per_pass"], 1.0);

  // No shard answering at all when the router starts: it listens at once (an FFN grid works
  // so), and decides on sessions at the first request after they answer.
  router.reset();
  b.reset();
  const std::string a_port = std::to_string(a.port());
  a.stop();
  ChildProcess early({"router", "--port", "0", "--shards", shards});
  EXPECT_NE(early.startup_line().find("no shard answering yet"), std::string::npos) << early.startup_line();
  httplib::Client c("127.0.0.1", early.port());
  auto before = c.Post("/v1/sessions", json{{"max_positions", 16}}.dump(), "application/json");
  ASSERT_TRUE(before);
  EXPECT_EQ(before->status, 502) << before->body;
  ChildProcess a_again({"serve", kDemo, "--port", a_port, "--layers", "0-2", "--threads", "1", "--sessions"});
  b = std::make_unique<ChildProcess>(std::vector<std::string>{"serve", kDemo, "--port", b_port, "--layers", "3-5", "--threads", "1", "--sessions"});
  EXPECT_TRUE(test::eventually([&] {  // the router's health poll reads the shards' stats
    auto r = c.Get("/v1/stats");
    return r && r->status == 200 && json::parse(r->body).value("hidden_size", 0) > 0 && json::parse(r->body).contains("sessions");
  }));
  const json later = run_json("--remote-layers " + early.url() + " --wire f32");
  EXPECT_EQ(later["generated_ids"], local["generated_ids"]);
}

// What a router's session ids may and may not do: they are its own (unknown to the shards,
// which never see them), bound to the caller's Authorization, gone once deleted; a fork
// stays with its key and continues as its source would.
TEST(SessionsGrid, RouterSessionIdsAreItsOwnAndBoundToTheCallersKey) {
  ChildProcess a = session_shard("0-2"), b = session_shard("3-5");
  ChildProcess router({"router", "--port", "0", "--shards", "0-2=" + a.url() + ",3-5=" + b.url()});
  httplib::Client r("127.0.0.1", router.port()), shard("127.0.0.1", a.port());
  const httplib::Headers alice{{"Authorization", "Bearer alice"}}, bob{{"Authorization", "Bearer bob"}};
  auto open = [&](const httplib::Headers& who, const json& body) { return r.Post("/v1/sessions", who, body.dump(), "application/json"); };
  auto step = [&](const httplib::Headers& who, const std::string& id, uint32_t n, uint32_t start, uint32_t rows) {
    const wire::SessionStep st{*wire::parse_session_id(id), n, start, rows, 0};
    std::vector<uint32_t> tokens(rows, 5);
    std::vector<float> x(rows * test::kDemoHidden, 0.125f);
    std::string body;
    EXPECT_TRUE(wire::encode_walk_layers_request(wire::Encoding::f32, {&st, 1}, tokens, test::kDemoHidden, x, body).ok());
    return r.Post("/v1/walk-layers", who, body, "application/x-larql-ffn");
  };
  auto code = [](const httplib::Result& res) { return res ? json::parse(res->body, nullptr, false).value("code", "") : "(none)"; };
  auto opened = open(alice, {{"max_positions", 64}});
  ASSERT_TRUE(opened && opened->status == 201) << (opened ? opened->body : "");
  const std::string id = json::parse(opened->body)["session"].get<std::string>();
  ASSERT_EQ(step(alice, id, 1, 0, 4)->status, 200);
  EXPECT_EQ(code(step(bob, id, 2, 4, 1)), "session_unknown");  // another key
  EXPECT_EQ(shard.Delete("/v1/sessions/" + id)->status, 410);  // the shards never saw the router's id
  EXPECT_EQ(code(open(bob, {{"max_positions", 64}, {"fork", id}, {"positions", 4}})), "session_unknown");
  auto forked = open(alice, {{"max_positions", 64}, {"fork", id}, {"positions", 4}});
  ASSERT_TRUE(forked && forked->status == 201) << (forked ? forked->body : "");
  const std::string fork = json::parse(forked->body)["session"].get<std::string>();
  EXPECT_NE(fork, id);
  const auto from_fork = step(alice, fork, 1, 4, 2), from_source = step(alice, id, 2, 4, 2);
  ASSERT_TRUE(from_fork && from_source);
  EXPECT_EQ(from_fork->status, 200);
  EXPECT_TRUE(from_fork->body.substr(8) == from_source->body.substr(8));
  EXPECT_EQ(r.Delete("/v1/sessions/" + id, bob)->status, 410);
  EXPECT_EQ(r.Delete("/v1/sessions/" + id, alice)->status, 204);
  EXPECT_EQ(code(step(alice, id, 3, 6, 1)), "session_unknown");  // forgotten
  EXPECT_EQ(r.Delete("/v1/sessions/" + fork, alice)->status, 204);
  EXPECT_EQ(open_sessions(a), 0u);
  EXPECT_EQ(open_sessions(b), 0u);
}

// A fork through the router of a session whose part died with its replica is that part's
// loss, 410 session_lost (not a 502): what the fork would continue is gone. The source's own
// next step finds the same.
TEST(SessionsGrid, AForkOfASessionWhosePartDiedIsSessionLost) {
  ChildProcess a = session_shard("0-2"), b = session_shard("3-5");
  ChildProcess router({"router", "--port", "0", "--shards", "0-2=" + a.url() + ",3-5=" + b.url()});
  httplib::Client r("127.0.0.1", router.port());
  auto opened = r.Post("/v1/sessions", json{{"max_positions", 64}}.dump(), "application/json");
  ASSERT_TRUE(opened && opened->status == 201) << (opened ? opened->body : "");
  const std::string id = json::parse(opened->body)["session"].get<std::string>();
  b.kill_now();
  auto forked = r.Post("/v1/sessions", json{{"max_positions", 64}, {"fork", id}, {"positions", 0}}.dump(), "application/json");
  ASSERT_TRUE(forked);
  EXPECT_EQ(forked->status, 410) << forked->body;
  EXPECT_EQ(json::parse(forked->body, nullptr, false).value("code", ""), "session_lost") << forked->body;
  EXPECT_EQ(open_sessions(a), 1u) << "the fork's part on the live range was not left open";
}

// Four clients, each `rounds` greedy answers of 48 tokens through `api`, every answer
// checked against its local text, while `meanwhile(finished)` runs beside them (it may
// throw: the clients are joined first). Returns the answers that equalled their local text;
// each that did not is a test failure naming it.
size_t answers_beside(const ChildProcess& api, int rounds, const std::function<void(const std::atomic<size_t>&)>& meanwhile) {
  const std::vector<std::string> prompts{"In the beginning", "And God said,", "Once upon a time", "The LORD is my"};
  std::map<std::string, std::string> local;
  for (const auto& p : prompts) {
    const auto r = test::run_command(std::string(LARQL_BINARY) + " run " + kDemo + " --prompt '" + p + "' --steps 48 --json --threads 1");
    EXPECT_EQ(r.status, 0) << r.output;
    local[p] = r.status == 0 ? json::parse(r.output)["text"].get<std::string>() : "";
  }
  std::atomic<size_t> finished{0}, equal{0};
  std::vector<std::thread> clients;
  for (const std::string& prompt : prompts)
    clients.emplace_back([&, prompt] {
      httplib::Client c("127.0.0.1", api.port());
      c.set_read_timeout(120);
      for (int round = 0; round < rounds; ++round) {
        auto r = c.Post("/v1/completions", json{{"prompt", prompt}, {"max_tokens", 48}, {"temperature", 0}}.dump(), "application/json");
        const bool same = r && r->status == 200 && json::parse(r->body)["choices"][0]["text"] == local[prompt];
        if (same) ++equal;
        else ADD_FAILURE() << prompt << ": " << (r ? std::to_string(r->status) + " " + r->body.substr(0, 400) : "no answer");
        ++finished;
      }
    });
  std::string failed;
  try {
    meanwhile(finished);
  } catch (const std::exception& e) {
    failed = e.what();
  }
  for (auto& t : clients) t.join();
  EXPECT_TRUE(failed.empty()) << failed;
  return equal;
}

// The API's batch through a router while a replica holding its sessions dies: every answer
// completes and equals its local text (the lost sequences replayed on the other replica).
TEST(SessionsGrid, TheApisAnswersSurviveAReplicaKilledUnderThem) {
  ChildProcess a1 = session_shard("0-2"), a2 = session_shard("0-2"), b1 = session_shard("3-5"), b2 = session_shard("3-5");
  ChildProcess router({"router", "--port", "0", "--shards",
                       "0-2=" + a1.url() + "|" + a2.url() + ",3-5=" + b1.url() + "|" + b2.url()});
  ChildProcess api({"api", kDemo, "--port", "0", "--parallel", "4", "--threads", "1", "--wire", "f32", "--remote-layers", router.url()});
  const size_t equal = answers_beside(api, 3, [&](const std::atomic<size_t>& finished) {
    // Once a replica of layers 3-5 holds sessions, it dies.
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (open_sessions(b1) + open_sessions(b2) == 0 && std::chrono::steady_clock::now() < until && finished < 12)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));  // polling the shards' stats, bounded by the deadline
    (open_sessions(b1) > 0 ? b1 : b2).kill_now();
  });
  EXPECT_EQ(equal, 12u);
  // The replays are counted.
  httplib::Client c("127.0.0.1", api.port());
  const std::string metrics = c.Get("/metrics")->body;
  const std::string name = "\nlarql_api_session_replays_total ";
  const size_t at = metrics.find(name);
  ASSERT_NE(at, std::string::npos) << metrics;
  EXPECT_GE(std::stoul(metrics.substr(at + name.size())), 1u);
}

// The API's answers through a router while replicas die and come back: four times a replica
// (never the last live one of its range) is killed and restarted on its own port under four
// clients' running answers; every answer completes and equals its local text.
TEST(SessionsGrid, AnswersSurviveReplicasKilledAndRestartedUnderThem) {
  const std::vector<std::string> ranges{"0-2", "0-2", "3-5", "3-5"};
  auto start = [](const std::string& range, const std::string& port) {
    return std::make_unique<ChildProcess>(
        std::vector<std::string>{"serve", kDemo, "--port", port, "--layers", range, "--threads", "1", "--sessions"});
  };
  std::vector<std::unique_ptr<ChildProcess>> shards;
  for (const auto& range : ranges) shards.push_back(start(range, "0"));
  std::vector<int> ports;
  for (const auto& s : shards) ports.push_back(s->port());
  ChildProcess router({"router", "--port", "0", "--shards",
                       "0-2=" + shards[0]->url() + "|" + shards[1]->url() + ",3-5=" + shards[2]->url() + "|" + shards[3]->url()});
  ChildProcess api({"api", kDemo, "--port", "0", "--parallel", "4", "--threads", "1", "--wire", "f32", "--remote-layers", router.url()});
  const size_t equal = answers_beside(api, 4, [&](const std::atomic<size_t>& finished) {
    // Kill and restart: replicas 0, 2, 1, 3 in turn, each once some answers have moved on.
    for (size_t k : {0, 2, 1, 3}) {
      const size_t before = finished;
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
      while (finished < std::min<size_t>(before + 2, 16) && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));  // polling the clients' progress, bounded by the deadline
      shards[k]->kill_now();
      shards[k]->stop();  // reaped: its port is free again, unless another socket took it meanwhile
      // On its own port again. The kernel may have given that port to an outgoing
      // connection (the router's, another test's): tried again until it is free.
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(15);
      for (;;) {
        try {
          shards[k] = start(ranges[k], std::to_string(ports[k]));
          break;
        } catch (const std::exception& e) {
          if (std::chrono::steady_clock::now() >= give_up) throw std::runtime_error("restarting replica " + std::to_string(k) + ": " + e.what());
          std::this_thread::sleep_for(std::chrono::milliseconds(100));  // a retry's pause, bounded by the deadline
        }
      }
    }
  });
  EXPECT_EQ(equal, 16u);
}

}  // namespace
}  // namespace larql
