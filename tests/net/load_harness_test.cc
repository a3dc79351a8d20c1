// The short version of the load and chaos harness (`larql loadtest`), on every change: a
// router in front of two shards of the demo model, and a shard alone, take mixed
// concurrent traffic (every encoding, 1-64 rows, batches across both ranges) and then the
// malformed-HTTP corpus. Within the servers' limits every answer is a well-formed 200,
// every malformed case is refused (4xx or closed) and followed by a served request, and
// the servers' memory and descriptors come back near where they were.
#include <gtest/gtest.h>

#include <httplib.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <thread>
#include <nlohmann/json.hpp>

#include "loadtest/malformed_http.h"
#include "loadtest/process_probe.h"
#include "support/command.h"
#include "support/demo_model.h"
#include "support/process.h"
#include "support/prometheus.h"

namespace larql {
namespace {

using nlohmann::json;
using test::ChildProcess;
using test::kDemo;

// The servers answer a trickled head with 408 after a second rather than the default ten.
const std::vector<std::string> kQuickHead{"--head-timeout-ms", "1000"};

std::vector<std::string> args(std::vector<std::string> a, const std::vector<std::string>& more = kQuickHead) {
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

// Under AddressSanitizer the servers keep freed memory in quarantine: their resident
// memory is reported but not judged there (descriptors still are).
#if defined(__SANITIZE_ADDRESS__)
constexpr const char* kMemoryCheck = " --ignore-rss";
#else
constexpr const char* kMemoryCheck = "";
#endif

json loadtest(const std::string& url, const std::string& pids, const std::string& extra) {
  const auto r = test::run_command(std::string(LARQL_BINARY) + " loadtest " + url + " --pids " + pids +
                                   " --settle-seconds 20 --malformed --case-timeout-ms 5000 --json " + extra + kMemoryCheck + " 2>&1");
  const json doc = json::parse(r.output, nullptr, false);
  EXPECT_FALSE(doc.is_discarded()) << r.output;
  EXPECT_EQ(r.status, doc.value("pass", false) ? 0 : 1) << r.output;
  return doc;
}

void expect_healthy_run(const json& doc) {
  ASSERT_TRUE(doc.is_object());
  const json& load = doc["load"];
  std::printf("%s: %s in %.1f s, p99 %.1f ms\n", doc["target"]["mode"].get<std::string>().c_str(), load["answers"].dump().c_str(),
              load["seconds"].get<double>(), load["latency_ms"]["p99"].get<double>());
  EXPECT_GT(load["ok"].get<size_t>(), 0u);
  EXPECT_EQ(load["ok"], load["requests"]) << "every answer within the servers' limits is a well-formed 200: " << load["answers"];
  EXPECT_EQ(load["mix"], json({"f32", "f16", "q8", "i8"}));
  for (const auto& c : doc["malformed"])
    EXPECT_TRUE(c["pass"].get<bool>()) << c["kind"] << "/" << c["case"] << " answered " << c["answer"]
                                        << ", valid request after it served: " << c["served_after"];
  EXPECT_GE(doc["malformed"].size(), 25u);
  for (const auto& p : doc["processes"]) {
    EXPECT_TRUE(p["settled"]["alive"].get<bool>()) << p;
    EXPECT_TRUE(p["recovered"].get<bool>()) << "resident memory or descriptors did not come back: " << p;
  }
  EXPECT_TRUE(doc["failures"].empty()) << doc["failures"];
}

TEST(LoadHarness, RecoveryMeansWithinTwentyPercentAndFourMegabytesAndTenDescriptors) {
  using loadtest::ProcessSample;
  constexpr size_t kMiB = size_t(1) << 20;
  const ProcessSample small{true, 10 * kMiB, 20}, large{true, 1000 * kMiB, 20};
  EXPECT_TRUE(recovered(small, {true, 16 * kMiB, 30}));   // 20% + 4 MB of a router's 10 MB
  EXPECT_FALSE(recovered(small, {true, 16 * kMiB + 1, 20}));
  EXPECT_FALSE(recovered(small, {true, 10 * kMiB, 31}));
  EXPECT_TRUE(recovered(large, {true, 1204 * kMiB, 20}));
  EXPECT_FALSE(recovered(large, {true, 1204 * kMiB + 1, 20}));
  EXPECT_FALSE(recovered(small, {false, 0, 0}));             // an exited process never recovers
  EXPECT_TRUE(recovered(small, {true, 900 * kMiB, 30}, false));  // memory not judged...
  EXPECT_FALSE(recovered(small, {true, 10 * kMiB, 31}, false));   // ...descriptors still are
  const ProcessSample self = loadtest::sample_process(getpid());
  EXPECT_TRUE(self.alive);
  EXPECT_GT(self.rss_bytes, 0u);
  EXPECT_GE(self.descriptors, 3u);  // stdin, stdout, stderr at least
}

TEST(LoadHarness, ACaseIsPassedByARefusalAndBySuccessOnlyWhereThatIsLegal) {
  using loadtest::RawAnswer;
  const auto corpus = loadtest::malformed_http_corpus("127.0.0.1:1");
  ASSERT_FALSE(corpus.empty());
  const auto strict = corpus.front(), lenient = *std::find_if(corpus.begin(), corpus.end(), [](const auto& c) { return c.may_succeed; });
  for (const auto& c : {strict, lenient}) {
    EXPECT_TRUE(acceptable(c, {RawAnswer::Kind::status, 400}));
    EXPECT_TRUE(acceptable(c, {RawAnswer::Kind::closed, 0}));
    EXPECT_FALSE(acceptable(c, {RawAnswer::Kind::status, 500}));
    EXPECT_FALSE(acceptable(c, {RawAnswer::Kind::timeout, 0}));
    EXPECT_FALSE(acceptable(c, {RawAnswer::Kind::connect_failed, 0}));
  }
  EXPECT_FALSE(acceptable(strict, {RawAnswer::Kind::status, 200}));
  EXPECT_TRUE(acceptable(lenient, {RawAnswer::Kind::status, 200}));
}

TEST(LoadHarness, ARouterAndItsShardsServeMixedLoadAndRefuseMalformedHttp) {
  ChildProcess a(args({"serve", kDemo, "--port", "0", "--layers", "0-2", "--threads", "1", "--wire-i8"}));
  ChildProcess b(args({"serve", kDemo, "--port", "0", "--layers", "3-5", "--threads", "1", "--wire-i8"}));
  ChildProcess router(args({"router", "--port", "0", "--shards", "0-2=" + a.url() + ",3-5=" + b.url()}));
  const std::string pids = std::to_string(a.pid()) + "," + std::to_string(b.pid()) + "," + std::to_string(router.pid());
  const json doc = loadtest(router.url(), pids, "--clients 8 --seconds 6 --rows 1-64 --batch-layers 1-6");
  expect_healthy_run(doc);
  EXPECT_EQ(doc["target"]["mode"], "router");
}

TEST(LoadHarness, AShardAloneServesMixedLoadAndRefusesMalformedHttp) {
  ChildProcess shard(args({"serve", kDemo, "--port", "0", "--threads", "1", "--wire-i8"}));
  const json doc = loadtest(shard.url(), std::to_string(shard.pid()), "--clients 8 --seconds 4 --rows 1-64 --batch-layers 1-3");
  expect_healthy_run(doc);
  EXPECT_EQ(doc["target"]["mode"], "ffn-service");
}

// Layer-range session traffic (PROTOCOL §13): opens, steps going back now and then, forks,
// deletes, abandoned sessions and malformed bodies answered with the code each asked for;
// afterwards every session closes (the abandoned ones by the idle timeout) and the KV bytes
// are back to 0, the shard alive with its memory and descriptors back.
TEST(LoadHarness, ASessionShardServesSessionTrafficAndEndsWithNoSessionOpen) {
  ChildProcess shard(args({"serve", kDemo, "--port", "0", "--layers", "0-2", "--threads", "1", "--sessions", "--session-idle-s", "1",
                           "--max-sessions", "64"}));
  const json doc = loadtest(shard.url(), std::to_string(shard.pid()), "--sessions --clients 4 --seconds 3");
  ASSERT_TRUE(doc.is_object());
  const json& s = doc["sessions"];
  for (const char* what : {"opens", "forks", "steps", "deletes", "abandoned", "malformed"})
    EXPECT_GT(s[what].get<size_t>(), 0u) << what << ": " << s;
  EXPECT_EQ(s["unexpected"], 0) << s["answers"];
  EXPECT_EQ(doc["sessions_left"]["open"], 0);
  EXPECT_EQ(doc["sessions_left"]["kv_bytes"], 0);
  for (const auto& c : doc["malformed"]) EXPECT_TRUE(c["pass"].get<bool>()) << c;
  for (const auto& p : doc["processes"]) EXPECT_TRUE(p["recovered"].get<bool>()) << p;
  EXPECT_TRUE(doc["failures"].empty()) << doc["failures"];
}

// The same through a router in front of two session shards: its parts are closed with its
// sessions (abandoned ones when it forgets them), so the shards end with none open either.
TEST(LoadHarness, ARouterServesSessionTrafficAndItsShardsEndWithNoSessionOpen) {
  ChildProcess a(args({"serve", kDemo, "--port", "0", "--layers", "0-2", "--threads", "1", "--sessions", "--session-idle-s", "2"}));
  ChildProcess b(args({"serve", kDemo, "--port", "0", "--layers", "3-5", "--threads", "1", "--sessions", "--session-idle-s", "2"}));
  ChildProcess router(args({"router", "--port", "0", "--shards", "0-2=" + a.url() + ",3-5=" + b.url()}));
  const std::string pids = std::to_string(a.pid()) + "," + std::to_string(b.pid()) + "," + std::to_string(router.pid());
  const json doc = loadtest(router.url(), pids, "--sessions --clients 4 --seconds 3");
  ASSERT_TRUE(doc.is_object());
  EXPECT_EQ(doc["target"]["mode"], "router");
  EXPECT_GT(doc["sessions"]["steps"].get<size_t>(), 0u);
  EXPECT_EQ(doc["sessions"]["unexpected"], 0) << doc["sessions"]["answers"];
  EXPECT_EQ(doc["sessions_left"]["open"], 0);
  for (const auto& shard : {&a, &b}) {
    httplib::Client c("127.0.0.1", shard->port());
    EXPECT_EQ(json::parse(c.Get("/v1/stats")->body)["sessions"]["open"], 0);
  }
  EXPECT_TRUE(doc["failures"].empty()) << doc["failures"];
}

// Session traffic through a router while a replica holding some of its sessions is
// SIGKILLed and restarted on its port: the load test's only answers beyond what it asked
// for are those sessions' 410s, and every session is closed at the end, the parts on the
// surviving replicas included.
TEST(LoadHarness, SessionTrafficThroughARouterSurvivesAReplicaKilledAndRestarted) {
  auto shard = [](const std::string& layers, const std::string& port) {
    return std::make_unique<ChildProcess>(
        args({"serve", kDemo, "--port", port, "--layers", layers, "--threads", "1", "--sessions", "--session-idle-s", "2"}));
  };
  auto a1 = shard("0-2", "0"), a2 = shard("0-2", "0"), b1 = shard("3-5", "0"), b2 = shard("3-5", "0");
  ChildProcess router(args({"router", "--port", "0", "--shards",
                            "0-2=" + a1->url() + "|" + a2->url() + ",3-5=" + b1->url() + "|" + b2->url()}));
  // No --pids: the load starts at once (a warm-up load, whose answers are not reported, would
  // come first otherwise).
  json doc;
  std::thread load([&] {
    const auto r = test::run_command(std::string(LARQL_BINARY) + " loadtest " + router.url() +
                                     " --sessions --clients 2 --seconds 8 --settle-seconds 20 --json 2>&1");
    doc = json::parse(r.output, nullptr, false);
    EXPECT_EQ(r.status, 0) << r.output;
  });
  auto open_on = [](const ChildProcess& p) { return test::server_metric(p.url(), "larql_shard_sessions_open"); };
  auto steps_on = [](const ChildProcess& p) { return test::server_metric(p.url(), "larql_shard_sessions_steps_total"); };
  // Killed once its sessions are being stepped, with seconds of the load to come.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(4);
  while ((steps_on(*b1) < 50 || open_on(*b1) < 2) && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // polling the shard's metrics, bounded by the deadline
  const bool held = open_on(*b1) >= 2;
  const std::string port = std::to_string(b1->port());
  b1->kill_now();
  b1.reset();  // reaped: its port is free
  b1 = shard("3-5", port);
  load.join();
  EXPECT_TRUE(held) << "the replica never held sessions before it was killed";
  ASSERT_TRUE(doc.is_object());
  const json& answers = doc["sessions"]["answers"];
  EXPECT_EQ(doc["sessions"]["unexpected"], 0) << answers;
  EXPECT_TRUE(answers.contains("410 session_lost")) << "no session was lost with the replica: " << answers;
  EXPECT_EQ(doc["sessions_left"]["open"], 0);
  for (const auto* p : {a1.get(), a2.get(), b1.get(), b2.get()}) EXPECT_EQ(open_on(*p), 0) << p->url();
  EXPECT_TRUE(doc["failures"].empty()) << doc["failures"];
}

TEST(LoadHarness, OverloadIsToleratedOnlyWhenAskedAndAUsageErrorSaysWhatWasWrong) {
  // One compute thread and a queue of one: eight clients must see 503s, which fail the run
  // unless --tolerate 503 says overload is the point.
  ChildProcess shard({"serve", kDemo, "--port", "0", "--threads", "1", "--max-queue", "1"});
  const std::string base = std::string(LARQL_BINARY) + " loadtest " + shard.url() + " --clients 8 --seconds 2 --rows 64 --json";
  const auto strict = test::run_command(base + " 2>&1");
  const json doc = json::parse(strict.output, nullptr, false);
  ASSERT_FALSE(doc.is_discarded()) << strict.output;
  ASSERT_TRUE(doc["load"]["answers"].contains("503 overloaded")) << "the shard was never busy: " << doc["load"]["answers"];
  EXPECT_EQ(strict.status, 1);
  EXPECT_EQ(test::run_command(base + " --tolerate 503 2>&1").status, 0);

  const auto remote = test::run_command(std::string(LARQL_BINARY) + " loadtest http://192.0.2.1:80 2>&1");
  EXPECT_EQ(remote.status, 2);
  EXPECT_NE(remote.output.find("not a loopback address; pass --allow-remote"), std::string::npos) << remote.output;
  const auto mix = test::run_command(base + " --mix f32,i8 2>&1");  // this shard does not offer i8
  EXPECT_EQ(mix.status, 2);
  EXPECT_NE(mix.output.find("--mix i8: " + shard.url() + " neither accepts nor sends it"), std::string::npos) << mix.output;
}

}  // namespace
}  // namespace larql
