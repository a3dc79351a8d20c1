// Real shard and router processes on loopback: parity through the router, the negotiated
// encoding passing through, cross-range batches equal to direct calls, failover when a
// replica dies mid-generation, a clear error when a whole range is gone, keyed shards,
// malformed shard maps, and resharding while a generation runs.
#include <gtest/gtest.h>

#include <atomic>
#include <httplib.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "infer/local_ffn.h"
#include "infer/sampler.h"
#include "infer/transformer.h"
#include "model/loader.h"
#include "model/synth.h"
#include "net/remote_ffn.h"
#include "support/command.h"
#include "support/gated_proxy.h"
#include "support/http_result.h"
#include "support/demo_model.h"
#include "support/eventually.h"
#include "support/process.h"
#include "support/prometheus.h"
#include "base/byte_io.h"
#include "wire/codec.h"

namespace larql {
namespace {

using nlohmann::json;
using test::ChildProcess;

using test::kDemo;
constexpr size_t kHidden = test::kDemoHidden;

const wire::EnvLookup kNoEnv = [](const char*) -> const char* { return nullptr; };

// Feeds a generation one step at a time, so a test can act between steps.
struct Stepper {
  Stepper(const Model& m, FfnBackend& ffn) : pool(1), t(m, ffn, pool) {}
  Status start(const std::vector<int>& prompt) {
    ids = prompt;
    return t.forward(prompt, 0, logits);
  }
  Status step() {
    ids.push_back(argmax(logits));
    return t.forward({&ids.back(), 1}, ids.size() - 1, logits);
  }
  ThreadPool pool;
  Transformer t;
  std::vector<int> ids;
  std::vector<float> logits;
};

std::vector<int> local_ids(const Model& m, const std::vector<int>& prompt, size_t steps) {
  ThreadPool pool(1);
  LocalFfn ffn(m, pool);
  Stepper s(m, ffn);
  EXPECT_TRUE(s.start(prompt).ok());
  for (size_t i = 0; i < steps; ++i) EXPECT_TRUE(s.step().ok());
  return s.ids;
}

class RouterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_path_ = kDemo;
    auto m = load_model(model_path_);
    ASSERT_TRUE(m.ok());
    model_ = std::make_unique<Model>(std::move(*m));
  }
  std::unique_ptr<ChildProcess> shard(const std::string& layers, std::vector<std::string> extra = {}) {
    std::vector<std::string> args{"serve", model_path_, "--port", "0", "--layers", layers, "--wire-i8", "--threads", "1"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto p = std::make_unique<ChildProcess>(args);
    EXPECT_TRUE(test::wait_healthy(p->url()));
    return p;
  }
  std::unique_ptr<ChildProcess> router(const std::string& spec, std::vector<std::string> extra = {}) {
    std::vector<std::string> args{"router", "--shards", spec, "--port", "0", "--timeout-ms", "3000", "--health-interval-ms", "100"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto p = std::make_unique<ChildProcess>(args);
    EXPECT_TRUE(test::wait_healthy(p->url()));
    return p;
  }
  std::unique_ptr<RemoteFfn> remote(const std::string& url, const char* wire_name, std::optional<std::string> key = {}) {
    std::vector<std::string> warnings;
    auto r = RemoteFfn::connect(*model_, {url, *wire::client_wire(wire_name, kNoEnv), key, {}, 5000}, &warnings);
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
    return r.ok() ? std::move(*r) : nullptr;
  }
  std::string model_path_;
  std::unique_ptr<Model> model_;
  const std::vector<int> prompt_{1, 429, 480, 375, 438, 437, 272, 284, 438, 441};
};

TEST_F(RouterTest, ParityAndNegotiatedEncodingPassThrough) {
  auto a = shard("0-2"), b = shard("3-5");
  auto r = router("0-2=" + a->url() + ",3-5=" + b->url());
  const auto expected = local_ids(*model_, prompt_, 30);
  auto f32 = remote(r->url(), "f32");
  ASSERT_TRUE(f32);
  Stepper s(*model_, *f32);
  ASSERT_TRUE(s.start(prompt_).ok());
  for (int i = 0; i < 30; ++i) ASSERT_TRUE(s.step().ok());
  EXPECT_EQ(s.ids, expected);
  EXPECT_EQ(f32->stats().f32_fallbacks, 0u);

  // q8 decode through the router: q8 both ways (34 bytes per 32 values), never re-encoded.
  auto q8 = remote(r->url(), "q8");
  ASSERT_TRUE(q8);
  EXPECT_EQ(q8->request_encodings(), wire::EncodingSet{wire::Encoding::q8});
  Stepper sq(*model_, *q8);
  ASSERT_TRUE(sq.start(prompt_).ok());
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(sq.step().ok());
  EXPECT_EQ(q8->stats().f32_fallbacks, 0u);
  const size_t calls = q8->stats().calls, rows = prompt_.size() + 10;  // prefill rows, then one per step
  EXPECT_EQ(q8->stats().bytes_received, 12 * calls + rows * model_->config.layers * (kHidden / 32 * 34));

  // The response type is the negotiated one, not f32 (the reference router's flaw).
  httplib::Client c(r->url());
  std::vector<float> x(kHidden, 0.25f);
  std::string body;
  ASSERT_TRUE(wire::encode_request(wire::Encoding::f32, {.layers = {4}, .seq_len = 1}, kHidden, x, body).ok());
  for (auto [accept, type] : {std::pair{"application/x-larql-ffn-f16", "application/x-larql-ffn-f16"},
                              std::pair{"application/x-larql-ffn-i8", "application/x-larql-ffn-i8"},
                              std::pair{"application/x-larql-ffn-q8", "application/x-larql-ffn-q8"},
                              std::pair{"", "application/x-larql-ffn"}}) {
    httplib::Headers h;
    if (*accept) h.emplace("Accept", accept);
    auto res = c.Post("/v1/walk-ffn", h, body, "application/x-larql-ffn");
    ASSERT_TRUE(res);
    EXPECT_EQ(res->get_header_value("Content-Type"), type);
    EXPECT_EQ(res->get_header_value("X-Larql-Shard"), b->url());
  }
  auto stats = json::parse(test::must(c.Get("/v1/stats")).body);
  EXPECT_EQ(stats["mode"], "router");
  EXPECT_EQ(stats["wire"]["request"], json({"f32", "f16", "q8", "i8"}));
  EXPECT_EQ(stats["layer_fingerprints"].size(), 6u);
}

TEST_F(RouterTest, CrossRangeBatchesEqualDirectCallsInEveryEncoding) {
  auto a = shard("0-2"), b = shard("3-5");
  auto r = router("0-2=" + a->url() + ",3-5=" + b->url());
  httplib::Client via(r->url()), direct_a(a->url()), direct_b(b->url());
  std::vector<float> x(2 * kHidden);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(float(i));
  for (const wire::EncodingInfo& info : wire::kEncodings) {
    const auto enc = info.encoding;
    const std::string name(info.name);
    std::string body;
    ASSERT_TRUE(wire::encode_request(enc, {.layers = {3, 0, 2}, .seq_len = 2}, kHidden, x, body).ok());
    const std::string ct(wire::content_type(enc));
    const httplib::Headers accept{{"Accept", ct}};
    auto res = via.Post("/v1/walk-ffn", accept, body, ct.c_str());
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200) << res->body;
    EXPECT_EQ(res->get_header_value("Content-Type"), ct);
    auto view = wire::parse_response(wire::as_bytes(res->body), enc, kHidden);
    ASSERT_TRUE(view.ok()) << view.error().message;
    ASSERT_EQ(view->records.size(), 3u);
    const uint32_t order[] = {3, 0, 2};
    for (size_t i = 0; i < 3; ++i) {
      EXPECT_EQ(view->records[i].layer, order[i]);
      std::string one;
      ASSERT_TRUE(wire::encode_request(enc, {.layers = {order[i]}, .seq_len = 2}, kHidden, x, one).ok());
      auto d = (order[i] < 3 ? direct_a : direct_b).Post("/v1/walk-ffn", accept, one, ct.c_str());
      ASSERT_TRUE(d);
      auto dv = wire::parse_response(wire::as_bytes(d->body), enc, kHidden);
      ASSERT_TRUE(dv.ok());
      // Spliced byte for byte: q8 and i8 are never re-quantised.
      EXPECT_EQ(std::string(view->records[i].values.begin(), view->records[i].values.end()),
                std::string(dv->records[0].values.begin(), dv->records[0].values.end()))
          << name << " layer " << order[i];
    }
  }
  // A layer no range covers is the caller's error (no_owning_shard, PROTOCOL §7).
  std::string body;
  std::vector<float> one(kHidden, 1.0f);
  ASSERT_TRUE(wire::encode_request(wire::Encoding::f32, {.layers = {1, 7}, .seq_len = 1}, kHidden, one, body).ok());
  auto res = via.Post("/v1/walk-ffn", body, "application/x-larql-ffn");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  EXPECT_EQ(json::parse(res->body)["code"], "no_owning_shard");
}

TEST_F(RouterTest, FailoverMidGenerationThenAClearErrorWhenARangeIsGone) {
  auto a1 = shard("0-2"), a2 = shard("0-2"), b1 = shard("3-5"), b2 = shard("3-5");
  // Health polls far apart: only a failed call can tell the router that a replica died.
  ChildProcess* replicas[] = {a1.get(), a2.get(), b1.get(), b2.get()};
  ChildProcess r({"router", "--shards", "0-2=" + a1->url() + "|" + a2->url() + ",3-5=" + b1->url() + "|" + b2->url(), "--port",
                  "0", "--timeout-ms", "3000", "--health-interval-ms", "600000"});
  ASSERT_TRUE(test::wait_healthy(r.url()));
  // The replica the router sends range `entry` to next: the first live one with the lowest latency.
  auto preferred = [&](size_t entry) -> ChildProcess* {
    const auto stats = json::parse(test::must(httplib::Client(r.url()).Get("/v1/stats")).body);
    const json* best = nullptr;
    for (const auto& rep : stats["shards"][entry]["replicas"])
      if (rep["state"] == "up" && (!best || rep["latency_ms"].get<double>() < (*best)["latency_ms"].get<double>())) best = &rep;
    for (ChildProcess* p : replicas)
      if (best && p->url() == (*best)["url"]) return p;
    return nullptr;
  };
  const auto expected = local_ids(*model_, prompt_, 40);
  auto client = remote(r.url(), "f32");
  ASSERT_TRUE(client);
  Stepper s(*model_, *client);
  ASSERT_TRUE(s.start(prompt_).ok());
  for (int i = 0; i < 40; ++i) {
    if (i == 10 || i == 20) {  // SIGKILL, mid-generation, the replica that would serve the next call
      ChildProcess* victim = preferred(i == 10 ? 0 : 1);
      ASSERT_TRUE(victim);
      EXPECT_GT(test::server_metric(victim->url(), "larql_shard_requests_total"), 0) << "it had served before";
      victim->kill_now();
    }
    auto st = s.step();
    ASSERT_TRUE(st.ok()) << "step " << i << ": " << st.error().message;
  }
  EXPECT_EQ(s.ids, expected);  // no client-visible error, and no zeros used
  // Both kills were noticed by a failed call and retried on the other replica.
  EXPECT_EQ(test::server_metric(r.url(), "larql_router_retries_total"), 2);

  for (ChildProcess* p : {a1.get(), a2.get()}) p->kill_now();  // now no replica of 0-2 is left
  std::vector<float> x(kHidden, 0.5f), y(kHidden);
  auto st = client->forward(0, x, 1, y);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("every replica of layers 0-2 failed"), std::string::npos) << st.error().message;
  httplib::Client c(r.url());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  json health;
  do {
    health = json::parse(test::must(c.Get("/v1/health")).body);
  } while (health["status"] != "degraded" && std::chrono::steady_clock::now() < deadline);
  EXPECT_EQ(health["status"], "degraded");
  EXPECT_EQ(health["uncovered"], json({"0-2"}));
}

TEST_F(RouterTest, KeyedShardsThroughTheRouter) {
  auto a = shard("0-5", {"--api-key", "k1"});
  auto r = router("0-5=" + a->url(), {"--shard-key", "k1"});
  auto keyed = remote(r->url(), "f16", std::string("k1"));
  ASSERT_TRUE(keyed);
  std::vector<float> x(kHidden, 0.5f), y(kHidden);
  EXPECT_TRUE(keyed->forward(1, x, 1, y).ok());
  // Without the caller's key the shard says 401, and the router passes it on.
  httplib::Client c(r->url());
  std::string body;
  ASSERT_TRUE(wire::encode_request(wire::Encoding::f32, {.layers = {1}, .seq_len = 1}, kHidden, x, body).ok());
  auto res = c.Post("/v1/walk-ffn", body, "application/x-larql-ffn");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 401);
}

TEST_F(RouterTest, MalformedShardMapsAreStartUpErrors) {
  // Each message names the part of the map that is wrong and what was expected.
  for (auto [spec, says] : {std::pair{"0-2=http://127.0.0.1:1,1-2=http://127.0.0.1:2",
                                      "shard map part '1-2=http://127.0.0.1:2' overlaps layers 0-2"},
                            std::pair{"0-x=http://127.0.0.1:1", "shard map part '0-x=http://127.0.0.1:1': layer range '0-x' is not valid"},
                            std::pair{"0-2=ftp://a", "shard 'ftp://a' in '0-2=ftp://a' is not a URL: expected http://HOST:PORT"},
                            std::pair{"3-1=http://127.0.0.1:1",
                                      "shard map part '3-1=http://127.0.0.1:1': layer range '3-1' is not valid: expected A-B with A ≤ B"},
                            std::pair{"http://127.0.0.1:1", "--shards needs layer ranges: RANGE=URL[|URL],..."}}) {
    const auto r = test::run_command(std::string(LARQL_BINARY) + " router --port 0 --shards '" + spec + "' 2>&1");
    EXPECT_EQ(r.status, 2) << spec;
    EXPECT_NE(r.output.find(std::string("larql router: ") + says), std::string::npos) << spec << ": " << r.output;
  }
}

// Stats of the wrong shape (here "layers" as a string) keep that replica down, named in
// the router's /v1/stats; the router keeps serving the other range and answering health
// while its poller reads them again and again.
TEST_F(RouterTest, AShardWithMalformedStatsStaysDownAndTheRouterServesOn) {
  auto real = shard("3-5");
  httplib::Server fake;
  std::atomic<int> stats_reads{0};
  fake.Get("/v1/stats", [&](const httplib::Request&, httplib::Response& res) {
    ++stats_reads;
    res.set_content(R"({"hidden_size":384,"layers":"0-2","layer_fingerprints":{"0":1}})", "application/json");
  });
  fake.Get("/v1/health", [](const httplib::Request&, httplib::Response& res) { res.set_content("{\"status\":\"ok\"}", "application/json"); });
  const int port = fake.bind_to_any_port("127.0.0.1");
  std::thread serving([&] { fake.listen_after_bind(); });
  const std::string fake_url = "http://127.0.0.1:" + std::to_string(port);
  {
    auto r = router("0-2=" + fake_url + ",3-5=" + real->url());
    httplib::Client c(r->url());
    ASSERT_TRUE(test::eventually([&] { return stats_reads >= 4; })) << "the health poller reads the stats again";
    auto health = c.Get("/v1/health");
    ASSERT_TRUE(health);
    EXPECT_EQ(json::parse(health->body).value("status", ""), "degraded") << health->body;
    auto stats = c.Get("/v1/stats");
    ASSERT_TRUE(stats);
    EXPECT_NE(stats->body.find(fake_url), std::string::npos) << stats->body;
    std::vector<float> x(kHidden, 0.5f);
    std::string body;
    ASSERT_TRUE(wire::encode_request(wire::Encoding::f32, {.layers = {4}, .seq_len = 1}, kHidden, x, body).ok());
    auto res = c.Post("/v1/walk-ffn", body, "application/x-larql-ffn");
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 200) << res->body;
  }
  fake.stop();
  serving.join();
}

TEST_F(RouterTest, AShardThatAnswersGarbageIsNamedNotTrusted) {
  auto real = shard("3-5");
  // A fake shard: real-looking stats for layers 0-2 (taken from a real shard), garbage FFN answers.
  auto donor = shard("0-2");
  const std::string stats = test::must(httplib::Client(donor->url()).Get("/v1/stats")).body;
  donor->stop();
  httplib::Server fake;
  fake.Get("/v1/stats", [&](const httplib::Request&, httplib::Response& res) { res.set_content(stats, "application/json"); });
  fake.Get("/v1/health", [](const httplib::Request&, httplib::Response& res) { res.set_content("{\"status\":\"ok\"}", "application/json"); });
  fake.Post("/v1/walk-ffn", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("this is not an FFN response", "application/x-larql-ffn");
  });
  const int port = fake.bind_to_any_port("127.0.0.1");
  std::thread serving([&] { fake.listen_after_bind(); });
  const std::string fake_url = "http://127.0.0.1:" + std::to_string(port);
  {
    auto r = router("0-2=" + fake_url + ",3-5=" + real->url());
    // A batch spanning both ranges: the router cannot splice garbage and says who sent it.
    httplib::Client c(r->url());
    std::vector<float> x(kHidden, 0.5f);
    std::string body;
    ASSERT_TRUE(wire::encode_request(wire::Encoding::f32, {.layers = {1, 4}, .seq_len = 1}, kHidden, x, body).ok());
    auto res = c.Post("/v1/walk-ffn", body, "application/x-larql-ffn");
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 502);
    EXPECT_NE(res->body.find(fake_url), std::string::npos) << res->body;
    // A single-range request passes through untouched; the client rejects it, naming the layer.
    auto client = remote(r->url(), "f32");
    ASSERT_TRUE(client);
    std::vector<float> y(kHidden, 9.0f);
    auto st = client->forward(0, x, 1, y);
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.error().message.find("layer 0"), std::string::npos) << st.error().message;
    EXPECT_EQ(y, std::vector<float>(kHidden, 9.0f));  // nothing was written: no garbage, no zeros
  }
  fake.stop();
  serving.join();
}

TEST_F(RouterTest, ReplicasOfDifferentModelsAreRefused) {
  const auto dir = std::filesystem::temp_directory_path() / ("larql_router_other_" + std::to_string(::getpid()));
  ASSERT_TRUE(write_synthetic_checkpoint(dir.string(), {.hidden = kHidden, .layers = 6, .ffn = kHidden, .heads = 6, .kv_heads = 2,
                                                        .vocab = 256, .context = 128, .dtype = DType::f32, .seed = 5})
                  .ok());
  auto a = shard("0-2");
  ChildProcess other({"serve", dir.string(), "--port", "0", "--layers", "0-2"});
  ASSERT_TRUE(test::wait_healthy(other.url()));
  const auto r = test::run_command(std::string(LARQL_BINARY) + " router --port 0 --shards '0-2=" + a->url() + "|" +
                                   other.url() + "' 2>&1");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("different model and is refused"), std::string::npos) << r.output;
  std::filesystem::remove_all(dir);
}

TEST_F(RouterTest, ReshardingWhileAGenerationRuns) {
  auto a = shard("0-2"), b = shard("3-5"), c = shard("0-5");
  auto r = router("0-2=" + a->url() + ",3-5=" + b->url(), {"--admin-key", "adm"});
  const auto expected = local_ids(*model_, prompt_, 30);
  auto client = remote(r->url(), "f32");
  ASSERT_TRUE(client);
  Stepper s(*model_, *client);
  ASSERT_TRUE(s.start(prompt_).ok());
  httplib::Client admin(r->url());
  for (int i = 0; i < 30; ++i) {
    if (i == 10) {  // move layers 0-2 from a to a new replica set: add c for 0-2, remove a
      auto res = admin.Post("/admin/shards", {{"Authorization", "Bearer adm"}},
                            json{{"add", {{{"layers", "0-2"}, {"url", c->url()}}}}, {"remove", {a->url()}}}.dump(),
                            "application/json");
      ASSERT_TRUE(res);
      ASSERT_EQ(res->status, 200) << res->body;
      a->stop();
    }
    ASSERT_TRUE(s.step().ok()) << "step " << i;
  }
  EXPECT_EQ(s.ids, expected);
  auto listing = json::parse(test::must(admin.Get("/admin/shards", {{"Authorization", "Bearer adm"}})).body);
  EXPECT_EQ(listing["shards"][0]["replicas"], json({c->url()}));
  EXPECT_EQ(test::must(admin.Get("/admin/shards")).status, 401);
}


TEST_F(RouterTest, ReshardingWhileARequestIsInFlight) {
  auto a = shard("0-2"), b = shard("3-5"), c = shard("0-2");
  test::GatedProxy held(a->url());  // holds every walk-ffn call to a until opened
  auto r = router("0-2=" + held.url() + ",3-5=" + b->url(), {"--admin-key", "adm"});
  httplib::Client first(r->url()), second(r->url()), admin(r->url()), direct(c->url());
  const std::string body = test::demo_f32_request({1}, 1);
  std::optional<httplib::Result> in_flight;
  std::thread t([&] { in_flight.emplace(first.Post("/v1/walk-ffn", body, "application/x-larql-ffn")); });
  ASSERT_TRUE(held.wait_for_waiting(1)) << "the request never reached the held shard";

  // The map changes under the request: c takes layers 0-2, the held proxy is removed.
  auto res = admin.Post("/admin/shards", {{"Authorization", "Bearer adm"}},
                        json{{"add", {{{"layers", "0-2"}, {"url", c->url()}}}}, {"remove", {held.url()}}}.dump(),
                        "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  auto after = second.Post("/v1/walk-ffn", body, "application/x-larql-ffn");  // new requests take the new map
  ASSERT_TRUE(after);
  EXPECT_EQ(after->status, 200);
  EXPECT_EQ(after->get_header_value("X-Larql-Shard"), c->url());

  held.open();  // the old request finishes on the map it started with
  t.join();
  ASSERT_TRUE(in_flight && *in_flight);
  const httplib::Response& old = **in_flight;
  EXPECT_EQ(old.status, 200) << old.body;
  EXPECT_EQ(old.get_header_value("X-Larql-Shard"), held.url());
  auto reference = direct.Post("/v1/walk-ffn", body, "application/x-larql-ffn");
  ASSERT_TRUE(reference);
  // Same model, f32: the same layer, length and values (bytes 8-11 are the latency).
  ASSERT_EQ(old.body.size(), reference->body.size());
  EXPECT_TRUE(old.body.substr(0, 8) == reference->body.substr(0, 8) && old.body.substr(12) == reference->body.substr(12));
  EXPECT_TRUE(after->body.substr(12) == reference->body.substr(12));
}

TEST_F(RouterTest, AShardSlowerThanTheTimeoutIs504ShardTimeout) {
  auto a = shard("0-5");
  test::GatedProxy slow(a->url());
  ChildProcess r({"router", "--shards", "0-5=" + slow.url(), "--port", "0", "--timeout-ms", "300"});
  httplib::Client c(r.url());
  c.set_read_timeout(30, 0);
  auto res = c.Post("/v1/walk-ffn", test::demo_f32_request({2}, 1), "application/x-larql-ffn");
  slow.open();
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 504) << res->body;
  const auto j = json::parse(res->body);
  EXPECT_EQ(j.value("code", ""), "shard_timeout");
  EXPECT_NE(j.value("error", "").find("every replica of layers 0-5 failed: " + slow.url()), std::string::npos) << j;
  EXPECT_EQ(test::server_metric(r.url(), "larql_router_errors_total"), 1);
}

TEST_F(RouterTest, MixedEncodingsAreReencodedAsF32AndSaySo) {
  auto a = shard("0-2");                                                                  // offers i8
  ChildProcess b({"serve", model_path_, "--port", "0", "--layers", "3-5", "--threads", "1"});  // does not
  auto r = router("0-2=" + a->url() + ",3-5=" + b.url());
  httplib::Client via(r->url()), direct_b(b.url());
  const httplib::Headers i8{{"Accept", "application/x-larql-ffn-i8"}};
  auto res = via.Post("/v1/walk-ffn", i8, test::demo_f32_request({1, 4}, 1), "application/x-larql-ffn");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  EXPECT_EQ(res->get_header_value("Content-Type"), "application/x-larql-ffn");
  EXPECT_EQ(res->get_header_value("X-Larql-Reencoded"), "f32");
  auto view = wire::parse_response(wire::as_bytes(res->body), wire::Encoding::f32, kHidden);
  ASSERT_TRUE(view.ok()) << view.error().message;
  ASSERT_EQ(view->records.size(), 2u);
  auto b_alone = direct_b.Post("/v1/walk-ffn", i8, test::demo_f32_request({4}, 1), "application/x-larql-ffn");
  ASSERT_TRUE(b_alone);
  auto bv = wire::parse_response(wire::as_bytes(b_alone->body), wire::Encoding::f32, kHidden);
  ASSERT_TRUE(bv.ok());
  EXPECT_EQ(std::string(view->records[1].values.begin(), view->records[1].values.end()),
            std::string(bv->records[0].values.begin(), bv->records[0].values.end()));  // the f32 part is untouched
}

TEST_F(RouterTest, StatsMetricsAdminAndTheShardKeyFromTheEnvironment) {
  auto a = shard("0-5", {"--api-key", "k2"});
  ::setenv("LARQL_SHARD_KEY", "k2", 1);  // inherited by the router process
  auto r = router("0-5=" + a->url());
  ::unsetenv("LARQL_SHARD_KEY");
  httplib::Client c(r->url());
  const auto stats = json::parse(test::must(c.Get("/v1/stats")).body);
  EXPECT_EQ(stats.value("hidden_size", 0), int(kHidden)) << stats;
  ASSERT_EQ(stats["shards"].size(), 1u);
  EXPECT_EQ(stats["shards"][0]["layers"], "0-5");
  EXPECT_EQ(stats["shards"][0]["replicas"][0]["url"], a->url());
  EXPECT_EQ(stats["shards"][0]["replicas"][0]["state"], "up");
  httplib::Client keyed(r->url());
  keyed.set_bearer_token_auth("k2");
  ASSERT_EQ(test::must(keyed.Post("/v1/walk-ffn", test::demo_f32_request({0, 5}, 1), "application/x-larql-ffn")).status, 200);
  const std::string metrics = test::must(c.Get("/metrics")).body;
  EXPECT_EQ(test::metric_sum(metrics, "larql_router_requests_total"), 1) << metrics;
  EXPECT_EQ(test::metric_sum(metrics, "larql_router_retries_total"), 0) << metrics;
  // The call's body in and its answer out, by encoding (what the grid page shows per second).
  const double request_bytes = double(test::demo_f32_request({0, 5}, 1).size());
  EXPECT_EQ(test::metric_sum(metrics, "larql_router_bytes_total\\{direction=\"in\",encoding=\"f32\"\\}"), request_bytes) << metrics;
  EXPECT_GT(test::metric_sum(metrics, "larql_router_bytes_total\\{direction=\"out\",encoding=\"f32\"\\}"), 0) << metrics;
  // Without --admin-key there is no admin endpoint at all.
  auto admin = c.Get("/admin/shards", {{"Authorization", "Bearer anything"}});
  ASSERT_TRUE(admin);
  EXPECT_EQ(admin->status, 404);
}

}  // namespace
}  // namespace larql
