// FfnService without sockets, with FFN backends that misbehave on purpose: the paths a
// healthy LocalFfn cannot reach on demand (a full compute queue, an FFN that produces NaN).
#include <gtest/gtest.h>
#include <unistd.h>

#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "base/byte_io.h"
#include "infer/local_ffn.h"
#include "model/loader.h"
#include "model/synth.h"
#include "net/ffn_service.h"
#include "support/eventually.h"
#include "wire/codec.h"

namespace larql {
namespace {

constexpr size_t kHidden = 64;

// A gate that forward() calls wait at until the test opens it; the test can wait until
// one has arrived, so it knows a request is mid-compute.
class Gate {
 public:
  void arrive_and_wait() {
    std::unique_lock lock(mutex_);
    entered_ = true;
    changed_.notify_all();
    changed_.wait(lock, [this] { return released_; });
  }
  void wait_entered() {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [this] { return entered_; });
  }
  void release() {
    std::lock_guard lock(mutex_);
    released_ = true;
    changed_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  bool entered_ = false, released_ = false;
};

// Holds every forward() at the gate.
class GateFfn : public FfnBackend, public Gate {
 public:
  Status forward(uint32_t, std::span<const float>, size_t, std::span<float> out) override {
    arrive_and_wait();
    std::fill(out.begin(), out.end(), 1.0f);
    return Ok{};
  }
};

// An FFN gone wrong: one NaN among its outputs.
class NanFfn : public FfnBackend {
 public:
  Status forward(uint32_t, std::span<const float>, size_t, std::span<float> out) override {
    std::fill(out.begin(), out.end(), 0.25f);
    out[out.size() / 2] = std::numeric_limits<float>::quiet_NaN();
    return Ok{};
  }
};

class FfnServiceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = std::filesystem::temp_directory_path() / ("larql_ffn_service_" + std::to_string(::getpid()));
    ASSERT_TRUE(write_synthetic_checkpoint(dir_.string(), {.hidden = kHidden, .layers = 2, .ffn = 32, .heads = 2,
                                                           .kv_heads = 2, .vocab = 256, .context = 16,
                                                           .dtype = DType::f32, .seed = 3})
                    .ok());
    auto m = load_model(dir_.string());
    ASSERT_TRUE(m.ok()) << m.error().message;
    model_ = new Model(std::move(*m));
  }
  static void TearDownTestSuite() {
    delete model_;
    std::filesystem::remove_all(dir_);
  }

  static std::string request(uint32_t layer) {
    std::vector<float> x(kHidden, 0.5f);
    std::string body;
    auto enc = wire::encode_request(wire::Encoding::f32, {.layers = {layer}, .seq_len = 1}, kHidden, x, body);
    EXPECT_TRUE(enc.ok());
    return body;
  }
  static std::string code_of(const HttpReply& r) {
    return nlohmann::json::parse(r.body, nullptr, false).value("code", "");
  }

  static inline std::filesystem::path dir_;
  static inline Model* model_ = nullptr;
};

// Records each forward() and holds the first one at the gate, passing all to an inner FFN.
class RecordingFfn : public FfnBackend, public Gate {
 public:
  explicit RecordingFfn(FfnBackend& inner) : inner_(inner) {}
  Status forward(uint32_t layer, std::span<const float> x, size_t rows, std::span<float> out) override {
    bool first;
    {
      std::lock_guard lock(mutex_);
      calls.emplace_back(layer, rows);
      first = calls.size() == 1;
    }
    if (first) arrive_and_wait();
    return inner_.forward(layer, x, rows, out);
  }
  std::vector<std::pair<uint32_t, size_t>> calls;

 private:
  FfnBackend& inner_;
  std::mutex mutex_;  // guards calls
};

TEST_F(FfnServiceTest, RequestsForOneLayerThatWaitTogetherShareOneMatmulWithExactResults) {
  ThreadPool pool(1);
  LocalFfn local(*model_, pool);
  RecordingFfn recording(local);
  FfnService service(*model_, recording, {.layers = {0, 1}, .max_body_bytes = 1 << 20, .max_queue = 8});
  // Two clients' rows for layer 1, different values; what each gives alone.
  auto body = [](float v) {
    std::vector<float> x(kHidden);
    for (size_t i = 0; i < kHidden; ++i) x[i] = v * std::sin(float(i));
    std::string out;
    EXPECT_TRUE(wire::encode_request(wire::Encoding::f32, {.layers = {1}, .seq_len = 1}, kHidden, x, out).ok());
    return out;
  };
  FfnService alone(*model_, local, {.layers = {0, 1}, .max_body_bytes = 1 << 20});
  const std::string expected_a = alone.walk_ffn(body(0.5f), "application/x-larql-ffn", "").body;
  const std::string expected_b = alone.walk_ffn(body(-2.0f), "application/x-larql-ffn", "").body;

  HttpReply busy_reply, a, b;
  std::thread busy([&] { busy_reply = service.walk_ffn(request(0), "application/x-larql-ffn", ""); });
  recording.wait_entered();  // layer 0 is computing: the next two wait for their turn together
  std::thread ta([&] { a = service.walk_ffn(body(0.5f), "application/x-larql-ffn", ""); });
  std::thread tb([&] { b = service.walk_ffn(body(-2.0f), "application/x-larql-ffn", ""); });
  ASSERT_TRUE(test::eventually([&] { return service.pending_layer_work() == 2; }));
  recording.release();
  busy.join();
  ta.join();
  tb.join();
  ASSERT_EQ(a.status, 200) << a.body;
  ASSERT_EQ(b.status, 200) << b.body;
  EXPECT_EQ(recording.calls, (std::vector<std::pair<uint32_t, size_t>>{{0, 1}, {1, 2}})) << "one matmul of two rows for layer 1";
  // Bit for bit what each gets alone (only the server-time field of the header may differ).
  auto values = [](const std::string& r) { return r.substr(12); };
  EXPECT_EQ(values(a.body), values(expected_a));
  EXPECT_EQ(values(b.body), values(expected_b));
  EXPECT_NE(service.metrics().render().find("larql_shard_coalesced_total 1\n"), std::string::npos);
}

TEST_F(FfnServiceTest, RequestBeyondAFullQueueGets503WithRetryAfter) {
  GateFfn gate;
  FfnService service(*model_, gate, {.layers = {0, 1}, .max_body_bytes = 1 << 20, .max_queue = 0});
  HttpReply first;
  std::thread busy([&] { first = service.walk_ffn(request(0), "application/x-larql-ffn", ""); });
  gate.wait_entered();  // the first request now holds the only compute slot

  const HttpReply second = service.walk_ffn(request(1), "application/x-larql-ffn", "");
  EXPECT_EQ(second.status, 503);
  EXPECT_EQ(second.retry_after_s, 1);
  EXPECT_EQ(second.content_type, "application/json");
  EXPECT_EQ(code_of(second), "overloaded") << second.body;

  gate.release();
  busy.join();
  EXPECT_EQ(first.status, 200) << first.body;
  // The slot is free again: the next request is served.
  EXPECT_EQ(service.walk_ffn(request(1), "application/x-larql-ffn", "").status, 200);
}

TEST_F(FfnServiceTest, NonFiniteOutputIsA500NeverSent) {
  NanFfn nan;
  FfnService service(*model_, nan, {.layers = {0, 1}, .encodings = {wire::Encoding::f32, wire::Encoding::f16, wire::Encoding::i8}, .max_body_bytes = 1 << 20, .max_queue = 4});
  for (const char* accept : {"application/x-larql-ffn", "application/x-larql-ffn-f16", "application/x-larql-ffn-q8",
                             "application/x-larql-ffn-i8"}) {
    const HttpReply reply = service.walk_ffn(request(0), "application/x-larql-ffn", accept);
    EXPECT_EQ(reply.status, 500) << accept;
    EXPECT_EQ(code_of(reply), "non_finite_output") << accept << ": " << reply.body;
  }
  const std::string json_request = R"({"layer": 0, "residual": [)" + std::string("0.5") +
                                   [] {
                                     std::string more;
                                     for (size_t i = 1; i < kHidden; ++i) more += ",0.5";
                                     return more;
                                   }() +
                                   R"(], "seq_len": 1, "full_output": true})";
  const HttpReply reply = service.walk_ffn(json_request, "application/json", "application/json");
  EXPECT_EQ(reply.status, 500) << reply.body;
  EXPECT_EQ(code_of(reply), "non_finite_output") << reply.body;
}

TEST_F(FfnServiceTest, DuplicateLayersAndWorkAboveTheLimitAreRefusedBeforeAnyCompute) {
  GateFfn never_released;  // a forward() call would hang the test: nothing may reach it
  FfnService service(*model_, never_released,
                     {.layers = {0, 1}, .max_body_bytes = 1 << 20, .max_queue = 4, .max_work = 3});
  std::vector<float> x(2 * kHidden, 0.5f);
  std::string body;
  ASSERT_TRUE(wire::encode_request(wire::Encoding::f32, {.layers = {1, 0, 1}, .seq_len = 1}, kHidden,
                                   std::span(x).first(kHidden), body).ok());
  HttpReply reply = service.walk_ffn(body, "application/x-larql-ffn", "");
  EXPECT_EQ(reply.status, 400);
  EXPECT_EQ(code_of(reply), "duplicate_layer") << reply.body;

  ASSERT_TRUE(wire::encode_request(wire::Encoding::f32, {.layers = {0, 1}, .seq_len = 2}, kHidden, x, body).ok());
  reply = service.walk_ffn(body, "application/x-larql-ffn", "");
  EXPECT_EQ(reply.status, 413);
  EXPECT_EQ(code_of(reply), "work_too_large") << reply.body;
  EXPECT_NE(reply.body.find("2 positions × 2 layers = 4 row-layers is above this server's limit of 3"), std::string::npos)
      << reply.body;
}

// Counts the layers it computes.
class CountingFfn : public FfnBackend {
 public:
  Status forward(uint32_t, std::span<const float>, size_t, std::span<float> out) override {
    ++calls;
    std::fill(out.begin(), out.end(), 1.0f);
    return Ok{};
  }
  int calls = 0;
};

TEST_F(FfnServiceTest, AClientThatHasGoneGetsNoMoreLayers) {
  CountingFfn counting;
  FfnService service(*model_, counting, {.layers = {0, 1}, .max_body_bytes = 1 << 20});
  std::vector<float> x(kHidden, 0.5f);
  std::string body;
  ASSERT_TRUE(wire::encode_request(wire::Encoding::f32, {.layers = {0, 1}, .seq_len = 1}, kHidden, x, body).ok());
  const HttpReply reply = service.walk_ffn(body, "application/x-larql-ffn", "", [] { return true; });
  EXPECT_EQ(code_of(reply), "cancelled") << reply.body;
  EXPECT_EQ(counting.calls, 1);  // checked between layers: the first ran, the second was dropped
  EXPECT_NE(service.metrics().render().find("larql_shard_cancelled_total 1\n"), std::string::npos);
  // A client still there gets both layers.
  EXPECT_EQ(service.walk_ffn(body, "application/x-larql-ffn", "", [] { return false; }).status, 200);
  EXPECT_EQ(counting.calls, 3);
}

TEST_F(FfnServiceTest, WorkWhoseDeadlinePassedIsDropped) {
  CountingFfn counting;
  FfnService service(*model_, counting, {.layers = {0, 1}, .max_body_bytes = 1 << 20});
  const auto passed = std::chrono::steady_clock::now() - std::chrono::milliseconds(1);
  HttpReply reply = service.walk_ffn(request(0), "application/x-larql-ffn", "", {}, passed);
  EXPECT_EQ(reply.status, 504);
  EXPECT_EQ(code_of(reply), "deadline_exceeded") << reply.body;
  EXPECT_EQ(counting.calls, 0);
  reply = service.walk_ffn(request(0), "application/x-larql-ffn", "", {}, std::chrono::steady_clock::now() + std::chrono::hours(1));
  EXPECT_EQ(reply.status, 200);
  EXPECT_EQ(counting.calls, 1);
}

TEST_F(FfnServiceTest, Q8IsOfferedByDefaultAndRefusedWithAReasonWhenNot) {
  CountingFfn counting;
  std::vector<float> x(kHidden, 0.5f);
  std::string q8_body;
  ASSERT_TRUE(wire::encode_request(wire::Encoding::q8, {.layers = {0}, .seq_len = 1}, kHidden, x, q8_body).ok());
  const std::string q8 = "application/x-larql-ffn-q8";

  FfnService offered(*model_, counting, {.layers = {0, 1}});
  HttpReply reply = offered.walk_ffn(q8_body, q8, q8);
  EXPECT_EQ(reply.status, 200) << reply.body;
  EXPECT_EQ(reply.content_type, q8);
  EXPECT_EQ(reply.body.size(), 12 + kHidden / 32 * 34);
  EXPECT_EQ(offered.stats()["wire"]["request"], nlohmann::json({"f32", "f16", "q8"}));
  EXPECT_NE(offered.metrics().render().find("bytes_total{direction=\"out\",encoding=\"q8\"} " +
                                            std::to_string(reply.body.size())),
            std::string::npos);

  FfnService disabled(*model_, counting, {.layers = {0, 1}, .encodings = {wire::Encoding::f32, wire::Encoding::f16}});
  reply = disabled.walk_ffn(q8_body, q8, q8);
  EXPECT_EQ(reply.status, 415);
  EXPECT_EQ(code_of(reply), "unsupported_media_type");
  EXPECT_NE(reply.body.find("--no-wire-q8"), std::string::npos) << reply.body;
  EXPECT_EQ(disabled.walk_ffn(request(0), "application/x-larql-ffn", q8).content_type, "application/x-larql-ffn");

  // A model whose hidden size is not whole q8 blocks never offers it, whatever it is told.
  const auto dir48 = dir_.string() + "-h48";
  ASSERT_TRUE(write_synthetic_checkpoint(dir48, {.hidden = 48, .layers = 1, .ffn = 32, .heads = 2, .kv_heads = 2,
                                                 .vocab = 256, .context = 16, .dtype = DType::f32, .seed = 3})
                  .ok());
  auto m48 = load_model(dir48);
  ASSERT_TRUE(m48.ok()) << m48.error().message;
  FfnService h48(*m48, counting, {.layers = {0, 0}});
  EXPECT_EQ(h48.stats()["wire"]["request"], nlohmann::json({"f32", "f16"}));
  reply = h48.walk_ffn(std::string(16 + 34, '\0'), q8, q8);
  EXPECT_EQ(reply.status, 415);
  EXPECT_NE(reply.body.find("multiple of 32; this model's is 48"), std::string::npos) << reply.body;
  std::filesystem::remove_all(dir48);
}

}  // namespace
}  // namespace larql
