// Hostile and heavy peers against real `larql serve` and `larql router` processes on the
// committed demo model: each request that used to abort a server, lock everyone out or
// run unbounded is answered as PROTOCOL §7 says, and the server serves afterwards.
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>

#include "support/command.h"
#include "support/demo_model.h"
#include "support/eventually.h"
#include "support/process.h"
#include "support/prometheus.h"
#include "support/raw_socket.h"
#include "wire/codec.h"

namespace larql {
namespace {

using nlohmann::json;
using test::ChildProcess;
using test::RawConnection;

constexpr size_t kHidden = test::kDemoHidden;
using test::kDemo;

std::string f32_request(const std::vector<uint32_t>& layers, uint32_t rows) { return test::demo_f32_request(layers, rows); }

std::string walk_ffn_head(size_t content_length, const std::string& extra = "") {
  return "POST /v1/walk-ffn HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-larql-ffn\r\n" + extra +
         "Content-Length: " + std::to_string(content_length) + "\r\n\r\n";
}

std::string code_of(const std::string& body) { return json::parse(body, nullptr, false).value("code", ""); }

double shard_metric(const ChildProcess& s, const std::string& name) { return test::server_metric(s.url(), name); }

using test::eventually;

bool health_answers(int port) {
  const std::string r = test::raw_exchange(port, "GET /v1/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  return test::status_of(r) == 200 && json::parse(test::body_of(r), nullptr, false).value("status", "") != "";
}

TEST(Hardening, NonUtf8BytesInPathOrContentTypeGetJsonErrorsAndTheServersLive) {
  ChildProcess shard({"serve", kDemo, "--port", "0", "--threads", "1"});
  ChildProcess router({"router", "--port", "0", "--shards", "0-5=" + shard.url()});
  for (const ChildProcess* server : {&shard, &router}) {
    for (const std::string path : {"/\xff", "/v1/health\xc3", "/v1\xfawalk-ffn"}) {
      const std::string r = test::raw_exchange(server->port(), "GET " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
      EXPECT_EQ(test::status_of(r), 404) << r;
      const auto body = json::parse(test::body_of(r), nullptr, false);
      ASSERT_FALSE(body.is_discarded()) << "not JSON: " << r;
      EXPECT_EQ(body.value("code", ""), "not_found");
      EXPECT_NE(body.value("error", "").find("no such path: /"), std::string::npos) << body;
    }
    const std::string request = f32_request({0}, 1);
    const std::string r =
        test::raw_exchange(server->port(), "POST /v1/walk-ffn HTTP/1.1\r\nHost: x\r\nContent-Type: \xff\r\nConnection: close\r\n"
                                           "Content-Length: " + std::to_string(request.size()) + "\r\n\r\n" + request);
    EXPECT_EQ(test::status_of(r), 415) << r;
    EXPECT_EQ(code_of(test::body_of(r)), "unsupported_media_type") << r;
    EXPECT_TRUE(health_answers(server->port()));
  }
  EXPECT_EQ(router.stop(), 0);
  EXPECT_EQ(shard.stop(), 0);
}

TEST(Hardening, IdleAndTricklingConnectionsDoNotLockOthersOut) {
  ChildProcess shard({"serve", kDemo, "--port", "0", "--threads", "1", "--max-connections", "64"});
  // 150 idle connections and 150 that have sent part of a request head, far beyond the 64 slots.
  std::vector<std::unique_ptr<RawConnection>> hogs;
  for (int i = 0; i < 300; ++i) {
    hogs.push_back(std::make_unique<RawConnection>(shard.port()));
    ASSERT_TRUE(hogs.back()->connected());
    if (i % 2) {
      ASSERT_TRUE(hogs.back()->send("POST /v1/walk-ffn HTTP/1.1\r\nHo"));
    }
  }
  // A fresh client is served within seconds, long before the 10 s head or 30 s idle
  // timeouts could have freed a slot: the longest-waiting hog was closed to make room. Until
  // the evicted hogs' threads have ended (slow under a sanitizer), a new connection may be
  // answered 503: the server bounds the connections it has not finished closing.
  const auto start = std::chrono::steady_clock::now();
  std::string last;
  EXPECT_TRUE(test::eventually([&] {
    RawConnection health(shard.port(), std::chrono::seconds(5));
    last = health.send("GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n") ? health.read_response() : "";
    return test::status_of(last) == 200;
  }, std::chrono::seconds(5))) << last.substr(0, 300);
  const std::string body = f32_request({2}, 1);
  RawConnection walk(shard.port(), std::chrono::seconds(5));
  ASSERT_TRUE(walk.send(walk_ffn_head(body.size()) + body));
  const std::string answer = walk.read_response();
  EXPECT_EQ(test::status_of(answer), 200) << answer.substr(0, 300);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("health and walk-ffn answered in %.3f s beside 300 idle or trickling connections (64 slots)\n", seconds);
  EXPECT_LT(seconds, 5.0);
  // The evicted hogs see their connection closed (end of stream), not an error page.
  EXPECT_EQ(hogs.front()->read_until_close(), "");
  EXPECT_EQ(shard.stop(), 0);
}

TEST(Hardening, ARequestHeadTrickledPastTheHeadTimeoutGets408) {
  ChildProcess shard({"serve", kDemo, "--port", "0", "--threads", "1", "--head-timeout-ms", "300"});
  RawConnection slow(shard.port());
  const std::string head = "GET /v1/health HTTP/1.1\r\nHost: x\r\nX-Padding: " + std::string(200, 'a') + "\r\n\r\n";
  // One byte every 20 ms: each read makes progress, so only a deadline on the whole head ends it.
  for (size_t i = 0; i < head.size() && !slow.readable(); ++i) {
    if (!slow.send(head.substr(i, 1))) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the trickle itself, not synchronisation
  }
  std::string answer = slow.read_until_close();
  EXPECT_EQ(test::status_of(answer), 408) << answer;
  EXPECT_EQ(code_of(test::body_of(answer)), "bad_request") << answer;
  EXPECT_NE(answer.find("head did not arrive in time (300 ms allowed)"), std::string::npos) << answer;

  // A body slower than --min-body-rate after its grace is cut off the same way.
  ChildProcess strict({"serve", kDemo, "--port", "0", "--threads", "1", "--head-timeout-ms", "200", "--min-body-rate", "100"});
  RawConnection dribble(strict.port());
  ASSERT_TRUE(dribble.send(walk_ffn_head(1000000) + std::string(10, '\0')));
  answer = dribble.read_until_close();
  EXPECT_EQ(test::status_of(answer), 408) << answer;
  EXPECT_NE(answer.find("body did not arrive in time"), std::string::npos) << answer;
  EXPECT_TRUE(health_answers(shard.port()));
  EXPECT_TRUE(health_answers(strict.port()));
}

TEST(Hardening, AnUnauthenticatedBodyIsRefusedBeforeItIsRead) {
  ChildProcess shard({"serve", kDemo, "--port", "0", "--threads", "1", "--api-key", "sesame"});
  // 60 MB announced, none sent: the 401 comes as soon as the headers are in.
  RawConnection c(shard.port(), std::chrono::seconds(5));
  ASSERT_TRUE(c.send(walk_ffn_head(60'000'000)));
  const std::string answer = c.read_response();
  EXPECT_EQ(test::status_of(answer), 401) << answer;
  EXPECT_EQ(code_of(test::body_of(answer)), "unauthorized") << answer;
  // With the key the same path computes.
  const std::string body = f32_request({1}, 2);
  RawConnection keyed(shard.port());
  ASSERT_TRUE(keyed.send(walk_ffn_head(body.size(), "Authorization: Bearer sesame\r\n") + body));
  EXPECT_EQ(test::status_of(keyed.read_response()), 200);
  EXPECT_TRUE(health_answers(shard.port()));  // /v1/health needs no key
}

TEST(Hardening, DuplicateLayersAndOversizedWorkAreRefused) {
  ChildProcess shard({"serve", kDemo, "--port", "0", "--threads", "1", "--max-work", "100"});
  ChildProcess router({"router", "--port", "0", "--shards", "0-5=" + shard.url()});
  httplib::Client direct(shard.url()), routed(router.url());
  for (httplib::Client* c : {&direct, &routed}) {
    auto res = c->Post("/v1/walk-ffn", f32_request({1, 4, 1}, 1), "application/x-larql-ffn");
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 400) << res->body;
    EXPECT_EQ(code_of(res->body), "duplicate_layer") << res->body;
    EXPECT_NE(res->body.find("layer 1 is named more than once"), std::string::npos) << res->body;
  }
  auto res = direct.Post("/v1/walk-ffn", f32_request({0, 1}, 60), "application/x-larql-ffn");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 413) << res->body;
  EXPECT_EQ(code_of(res->body), "work_too_large") << res->body;
  EXPECT_NE(res->body.find("60 positions × 2 layers = 120 row-layers is above this server's limit of 100"), std::string::npos)
      << res->body;
  res = direct.Post("/v1/walk-ffn", f32_request({0, 1}, 50), "application/x-larql-ffn");  // exactly at the limit
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200) << res->body;
  auto stats = direct.Get("/v1/stats");
  ASSERT_TRUE(stats);
  EXPECT_EQ(json::parse(stats->body).value("max_work", 0), 100);
}

// A demo-model request big enough to keep two cores busy for seconds: 6 layers × kBusyRows.
const std::vector<uint32_t> kAllLayers{0, 1, 2, 3, 4, 5};

TEST(Hardening, WorkForAClientThatLeftStops) {
  ChildProcess shard({"serve", kDemo, "--port", "0"});
  const std::string body = f32_request(kAllLayers, test::kBusyRows);
  {
    RawConnection c(shard.port());
    ASSERT_TRUE(c.send(walk_ffn_head(body.size()) + body));
  }  // closed at once: the shard learns it between layers
  ASSERT_TRUE(eventually([&] { return shard_metric(shard, "larql_shard_cancelled_total") == 1; }))
      << "the shard never dropped the work of the client that left";
  const double layers_computed = shard_metric(shard, "larql_shard_compute_ms_count");
  std::printf("layers computed for the client that left: %g of 6\n", layers_computed);
  EXPECT_GE(layers_computed, 1);  // checked between layers: the first always runs
  EXPECT_LT(layers_computed, 6);
  EXPECT_TRUE(health_answers(shard.port()));
}

TEST(Hardening, ASmallRequestIsServedWhileALargeOneRuns) {
  ChildProcess shard({"serve", kDemo, "--port", "0"});
  const std::string big = f32_request(kAllLayers, test::kBusyRows);
  std::atomic<bool> big_answered{false};
  int big_status = 0;
  std::thread large([&] {
    httplib::Client c(shard.url());
    c.set_read_timeout(300, 0);
    auto res = c.Post("/v1/walk-ffn", big, "application/x-larql-ffn");
    big_status = res ? res->status : -1;
    big_answered = true;
  });
  // Once the large request has finished its first layer, a one-row request waits for at
  // most one of its layers, not for the other five.
  ASSERT_TRUE(eventually([&] { return shard_metric(shard, "larql_shard_compute_ms_count") >= 1; }));
  // What is checked is the order of the answers, not a latency: one layer of the large
  // request can take longer than the client's default 5 s read timeout under the
  // sanitizers on a CPU without AVX-512 (an AMD EPYC Zen 3, where the test took 55 s).
  httplib::Client small(shard.url());
  small.set_read_timeout(300, 0);
  auto res = small.Post("/v1/walk-ffn", f32_request({3}, 1), "application/x-larql-ffn");
  const bool large_still_running = !big_answered;
  large.join();
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_TRUE(large_still_running) << "the small request was answered only after the large one";
  EXPECT_EQ(big_status, 200);
}

TEST(Hardening, RouterApiKeyGuardsEverythingButHealth) {
  ChildProcess shard({"serve", kDemo, "--port", "0", "--threads", "1", "--api-key", "sesame"});
  ChildProcess router({"router", "--port", "0", "--shards", "0-5=" + shard.url(), "--shard-key", "sesame", "--api-key", "sesame"});
  EXPECT_NE(router.startup_line().find("key required"), std::string::npos) << router.startup_line();
  httplib::Client anonymous(router.url()), keyed(router.url());
  keyed.set_bearer_token_auth("sesame");
  for (const char* path : {"/v1/stats", "/metrics"}) {
    auto res = anonymous.Get(path);
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 401) << path;
    EXPECT_EQ(code_of(res->body), "unauthorized") << path;
    res = keyed.Get(path);
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 200) << path;
  }
  auto res = anonymous.Post("/v1/walk-ffn", f32_request({0}, 1), "application/x-larql-ffn");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 401);
  res = keyed.Post("/v1/walk-ffn", f32_request({0}, 1), "application/x-larql-ffn");  // the key goes on to the shard
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200) << res->body;
  EXPECT_TRUE(health_answers(router.port()));
}

TEST(Hardening, RouterWithoutShardKeyInFrontOfKeyedShardsSaysSo) {
  ChildProcess keyed({"serve", kDemo, "--port", "0", "--threads", "1", "--layers", "0-2", "--api-key", "sesame"});
  ChildProcess open({"serve", kDemo, "--port", "0", "--threads", "1", "--layers", "3-5"});
  // Only keyed shards: nothing can be covered, so the router refuses to start.
  const auto refused = test::run_command(std::string(LARQL_BINARY) + " router --port 0 --shards 0-2=" + keyed.url() + " 2>&1");
  EXPECT_EQ(refused.status, 2) << refused.output;
  EXPECT_NE(refused.output.find("shard " + keyed.url() + " requires a key: pass --shard-key"), std::string::npos)
      << refused.output;
  EXPECT_NE(refused.output.find("no layer range can be covered"), std::string::npos) << refused.output;

  // One keyed range among open ones: the router starts, degraded, and its health says why.
  ChildProcess router({"router", "--port", "0", "--shards", "0-2=" + keyed.url() + ",3-5=" + open.url()});
  httplib::Client c(router.url());
  auto health = c.Get("/v1/health");
  ASSERT_TRUE(health);
  const auto h = json::parse(health->body);
  EXPECT_EQ(h.value("status", ""), "degraded") << h;
  ASSERT_EQ(h["problems"].size(), 1u) << h;
  EXPECT_EQ(h["problems"][0], "shard " + keyed.url() + " requires a key: pass --shard-key") << h;
  auto stats = c.Get("/v1/stats");
  ASSERT_TRUE(stats);
  EXPECT_EQ(json::parse(stats->body)["shards"][0]["replicas"][0].value("state", ""), "needs key") << stats->body;
}

}  // namespace
}  // namespace larql
