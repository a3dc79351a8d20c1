// The session shard without sockets (PROTOCOL §13): the state machine of steps (next,
// retry, stale, going back), forks, keys, the budget's first 503, deletes and idle expiry,
// and every check in its order.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstring>
#include <random>

#include "base/byte_io.h"
#include "infer/local_ffn.h"
#include "infer/transformer.h"
#include "model/loader.h"
#include "net/session_service.h"
#include "support/demo_model.h"
#include "wire/session_codec.h"

namespace larql {
namespace {

using nlohmann::json;
using wire::Encoding;
using wire::SessionId;
using wire::SessionStep;

constexpr const char* kF32 = "application/x-larql-ffn";

class SessionServiceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto m = load_model(test::kDemo);
    ASSERT_TRUE(m.ok()) << m.error().message;
    model_ = new Model(std::move(*m));
  }
  static void TearDownTestSuite() { delete model_; }

  void make(SessionServiceOptions o = {}) {
    o.layers = {0, 2};
    service_.reset();
    service_ = std::make_unique<SessionService>(*model_, layers_, turns_, o);
  }
  void SetUp() override { make(); }

  HttpReply open(size_t positions, const std::string& key = "", const std::string& extra = "") {
    return service_->open(R"({"max_positions": )" + std::to_string(positions) + extra + "}", "application/json", key);
  }
  SessionId open_id(size_t positions, const std::string& key = "") {
    HttpReply r = open(positions, key);
    EXPECT_EQ(r.status, 201) << r.body;
    return *wire::parse_session_id(json::parse(r.body)["session"].get<std::string>());
  }
  // A step of `rows` rows of tokens 1 + position and the same values in every row.
  static std::string body(std::vector<SessionStep> steps) {
    std::vector<uint32_t> tokens;
    for (const auto& s : steps)
      for (uint32_t r = 0; r < s.rows; ++r) tokens.push_back(1 + (s.start + r) % 50);
    std::vector<float> x(tokens.size() * test::kDemoHidden);
    for (size_t i = 0; i < x.size(); ++i) x[i] = float(int(i % test::kDemoHidden % 5) - 2) / 8;  // every row alike
    std::string out;
    EXPECT_TRUE(wire::encode_walk_layers_request(Encoding::f32, steps, tokens, test::kDemoHidden, x, out).ok());
    return out;
  }
  HttpReply step(std::vector<SessionStep> steps, const std::string& key = "") {
    return service_->walk_layers(body(steps), kF32, kF32, key);
  }
  static std::string code(const HttpReply& r) {
    const json j = json::parse(r.body, nullptr, false);
    return j.is_object() && j.contains("code") ? j["code"].get<std::string>() : "(" + std::to_string(r.status) + ")";
  }

  static inline Model* model_ = nullptr;
  ThreadPool pool_{1};
  LocalFfn ffn_{*model_, pool_};
  Transformer layers_{*model_, ffn_, pool_};
  FifoMutex turns_;
  std::unique_ptr<SessionService> service_;
};

TEST_F(SessionServiceTest, StepsRunInOrderARetryRepeatsAndAnythingElseIsStale) {
  const SessionId id = open_id(64);
  HttpReply first = step({{id, 1, 0, 4, 3}});
  ASSERT_EQ(first.status, 200) << first.body;
  EXPECT_EQ(first.body.size(), 8u + 4 * test::kDemoHidden);  // out_from 3 of 4: one row back
  HttpReply again = step({{id, 1, 0, 4, 3}});  // a re-sent last step: the same values, the same state
  ASSERT_EQ(again.status, 200);
  EXPECT_TRUE(again.body.substr(8) == first.body.substr(8));
  HttpReply stale = step({{id, 1, 0, 2, 0}});  // the last step's number with other rows
  EXPECT_EQ(stale.status, 409);
  EXPECT_EQ(code(stale), "stale_step");
  const json j = json::parse(stale.body);
  EXPECT_EQ(j["sessions"], json({0}));
  EXPECT_EQ(j["held"], json({4}));
  EXPECT_EQ(j["last_step"], json({1}));
  EXPECT_EQ(code(step({{id, 3, 4, 1, 0}})), "stale_step");
  EXPECT_EQ(code(step({{id, 2, 5, 1, 0}})), "bad_position");  // past what it holds
  EXPECT_EQ(code(step({{id, 2, 4, 61, 0}})), "context_full");  // 4 + 61 > 64
  EXPECT_EQ(step({{id, 2, 4, 1, 0}}).status, 200);
  EXPECT_EQ(step({{id, 3, 2, 2, 0}}).status, 200);  // back two positions
  EXPECT_EQ(step({{id, 4, 4, 0, 0}}).status, 200);  // rows 0 only drops
  EXPECT_EQ(step({{id, 5, 0, 3, 0}}).status, 200);  // start 0: afresh
}

TEST_F(SessionServiceTest, GoingBackFurtherThanTheRewindIsABadPosition) {
  const SessionId id = open_id(512);
  ASSERT_EQ(step({{id, 1, 0, 100, 100}}).status, 200);
  HttpReply far = step({{id, 2, 100 - kKvRewindPositions - 1, 1, 0}});
  EXPECT_EQ(code(far), "bad_position");
  EXPECT_EQ(json::parse(far.body)["min_start"], json({100 - kKvRewindPositions}));
  EXPECT_EQ(step({{id, 2, uint32_t(100 - kKvRewindPositions), 1, 0}}).status, 200);
}

TEST_F(SessionServiceTest, UnknownIdsAndOtherKeysAreTheSame410) {
  const SessionId id = open_id(32, "Bearer one");
  SessionId never{};
  never[0] = 1;
  EXPECT_EQ(code(step({{never, 1, 0, 1, 0}}, "Bearer one")), "session_unknown");
  HttpReply other = step({{id, 1, 0, 1, 0}}, "Bearer two");
  EXPECT_EQ(other.status, 410);
  EXPECT_EQ(code(other), "session_unknown");
  EXPECT_EQ(service_->close(wire::session_id_hex(id), "Bearer two").status, 410);
  EXPECT_EQ(step({{id, 1, 0, 1, 0}}, "Bearer one").status, 200);
}

TEST_F(SessionServiceTest, ChecksComeInTheProtocolsOrder) {
  const SessionId a = open_id(32), b = open_id(32);
  // duplicate_session before bad_token: one request breaking both.
  std::string dup = body({{a, 1, 0, 1, 0}, {a, 1, 0, 1, 0}});
  wire::WalkLayersRequestView view = *wire::parse_walk_layers_request(wire::as_bytes(dup), Encoding::f32, test::kDemoHidden, 8);
  std::string bad_token = dup;
  store_u32(reinterpret_cast<uint8_t*>(bad_token.data()) + 8 + 2 * 32, uint32_t(model_->config.vocab));
  EXPECT_EQ(code(service_->walk_layers(bad_token, kF32, kF32, "")), "duplicate_session");
  std::string token_only = body({{a, 1, 0, 1, 0}, {b, 1, 0, 1, 0}});
  store_u32(reinterpret_cast<uint8_t*>(token_only.data()) + 8 + 2 * 32 + 4, uint32_t(model_->config.vocab));
  EXPECT_EQ(code(service_->walk_layers(token_only, kF32, kF32, "")), "bad_token");
  EXPECT_EQ(code(step({{a, 1, 0, 2, 3}})), "bad_seq_len");  // out_from > rows, before the session's own checks
  EXPECT_EQ(code(service_->walk_layers(dup, "application/json", kF32, "")), "unsupported_media_type");
  EXPECT_EQ(code(service_->walk_layers(dup, "application/x-larql-ffn-i8", kF32, "")), "unsupported_media_type");
  // work_too_large: rows × layers above --max-work.
  SessionServiceOptions small;
  small.max_work = 8;
  make(small);
  const SessionId c = open_id(32);
  EXPECT_EQ(code(step({{c, 1, 0, 3, 0}})), "work_too_large");  // 3 rows × 3 layers
  EXPECT_EQ(step({{c, 1, 0, 2, 0}}).status, 200);
  (void)view;
}

TEST_F(SessionServiceTest, AForkContinuesAsItsSourceWould) {
  const SessionId src = open_id(64);
  ASSERT_EQ(step({{src, 1, 0, 6, 6}}).status, 200);
  EXPECT_EQ(code(open(64, "", R"(, "fork": "00000000000000000000000000000000", "positions": 2)")), "session_unknown");
  EXPECT_EQ(code(open(64, "", R"(, "fork": ")" + wire::session_id_hex(src) + R"(", "positions": 7)")), "bad_position");
  EXPECT_EQ(code(open(3, "", R"(, "fork": ")" + wire::session_id_hex(src) + R"(", "positions": 4)")), "bad_max_positions");
  HttpReply forked = open(64, "", R"(, "fork": ")" + wire::session_id_hex(src) + R"(", "positions": 4)");
  ASSERT_EQ(forked.status, 201) << forked.body;
  const SessionId fork = *wire::parse_session_id(json::parse(forked.body)["session"].get<std::string>());
  HttpReply from_fork = step({{fork, 1, 4, 2, 0}});
  HttpReply from_source = step({{src, 2, 4, 2, 0}});
  ASSERT_EQ(from_fork.status, 200);
  ASSERT_EQ(from_source.status, 200);
  EXPECT_TRUE(from_fork.body.substr(8) == from_source.body.substr(8));
  // Several sessions in one request: each as it would be alone.
  HttpReply both = step({{fork, 2, 6, 1, 0}, {src, 3, 6, 1, 0}});
  ASSERT_EQ(both.status, 200);
  const size_t row = 4 * test::kDemoHidden;
  EXPECT_TRUE(both.body.substr(8, row) == both.body.substr(8 + row, row));
}

// A fork copies only the positions it keeps: it holds no more than its own reservation,
// however much its source has grown.
TEST_F(SessionServiceTest, AForkHoldsNoMoreThanItReserves) {
  const SessionId src = open_id(256);
  ASSERT_EQ(step({{src, 1, 0, 200, 200}}).status, 200);
  const size_t before = service_->kv_bytes();
  HttpReply forked = open(150, "", R"(, "fork": ")" + wire::session_id_hex(src) + R"(", "positions": 140)");
  ASSERT_EQ(forked.status, 201) << forked.body;
  const size_t fork_reserved = json::parse(forked.body)["reserved_bytes"].get<size_t>();
  EXPECT_LE(service_->kv_bytes() - before, fork_reserved);
  EXPECT_LE(service_->kv_bytes(), service_->reserved_bytes());
  const SessionId fork = *wire::parse_session_id(json::parse(forked.body)["session"].get<std::string>());
  EXPECT_EQ(step({{fork, 1, 140, 0, 0}}).status, 200);  // it holds its 140
  EXPECT_EQ(code(step({{fork, 2, 141, 1, 0}})), "bad_position");
}

TEST_F(SessionServiceTest, TheBudgetRefusesTheFirstOpenPastItAndDeletesGiveItBack) {
  const size_t per = kv_capacity_bytes(model_->config, kv_capacity_positions(model_->config, 100, 2048), 0, 2);
  SessionServiceOptions o;
  o.kv_budget_bytes = 2 * per;
  make(o);
  const SessionId a = open_id(100);
  open_id(100);
  HttpReply third = open(100);
  EXPECT_EQ(third.status, 503);
  EXPECT_EQ(code(third), "overloaded");
  EXPECT_GE(third.retry_after_s, 1);
  EXPECT_EQ(open(1).status, 503);  // nothing is left
  ASSERT_EQ(step({{a, 1, 0, 100, 100}}).status, 200);
  EXPECT_GT(service_->kv_bytes(), 0u);
  EXPECT_LE(service_->kv_bytes(), service_->reserved_bytes());
  EXPECT_EQ(service_->close(wire::session_id_hex(a), "").status, 204);
  EXPECT_EQ(service_->close(wire::session_id_hex(a), "").status, 410);
  EXPECT_EQ(open(100).status, 201);
  EXPECT_EQ(service_->reserved_bytes(), 2 * per);
}

TEST_F(SessionServiceTest, IdleSessionsExpireAndTheirMemoryReturns) {
  SessionServiceOptions o;
  o.idle_timeout_s = 30;
  make(o);
  const SessionId id = open_id(64);
  ASSERT_EQ(step({{id, 1, 0, 10, 10}}).status, 200);
  service_->expire_idle(std::chrono::steady_clock::now() + std::chrono::seconds(10));
  EXPECT_EQ(service_->open_sessions(), 1u);
  service_->expire_idle(std::chrono::steady_clock::now() + std::chrono::seconds(31));
  EXPECT_EQ(service_->open_sessions(), 0u);
  EXPECT_EQ(service_->kv_bytes(), 0u);
  EXPECT_EQ(service_->reserved_bytes(), 0u);
  EXPECT_EQ(code(step({{id, 2, 10, 1, 0}})), "session_unknown");
}

TEST_F(SessionServiceTest, ALateDuplicateChangesNothingAndAFailedStepAcceptsItsRetry) {
  const SessionId id = open_id(64);
  const HttpReply one = step({{id, 1, 0, 5, 0}});
  ASSERT_EQ(one.status, 200);
  const HttpReply two = step({{id, 2, 5, 2, 0}});
  ASSERT_EQ(two.status, 200);
  EXPECT_EQ(code(step({{id, 1, 0, 5, 0}})), "stale_step");  // step 1 arriving late
  // A deadline that has passed before the first layer: 504, the session as it was.
  const std::string three = body({{id, 3, 7, 1, 0}});
  const HttpReply late = service_->walk_layers(three, kF32, kF32, "", {}, std::chrono::steady_clock::now() - std::chrono::seconds(1));
  EXPECT_EQ(late.status, 504) << late.body;
  const HttpReply retried = service_->walk_layers(three, kF32, kF32, "");
  EXPECT_EQ(retried.status, 200) << retried.body;
  // A caller gone between layers: the same.
  const std::string four = body({{id, 4, 8, 2, 0}});
  EXPECT_NE(service_->walk_layers(four, kF32, kF32, "", [] { return true; }).status, 200);
  EXPECT_EQ(service_->walk_layers(four, kF32, kF32, "").status, 200);
  // start + rows past 2^32 is context_full, computed in 64 bits.
  EXPECT_EQ(code(step({{id, 5, 0xFFFFFFFFu, 1, 0}})), "context_full");
}

// The state machine against an oracle: random opens, forks, steps (going back within the
// rewind), retries, late duplicates, failed steps and deletes over a few sessions; every
// answer's values equal a fresh pass over the session's whole history on a transformer of
// its own (what the session's cache must amount to), every refusal is the one the rules say.
TEST_F(SessionServiceTest, RandomTrafficAgreesWithAnOracleThatRecomputesEachHistory) {
  struct Oracle {
    SessionId id;
    std::vector<uint32_t> tokens = {};  // every position held, in order
    std::vector<float> x = {};          // their input rows
    uint32_t step = 0;
    std::string last_body = {};         // the last step's request, for a retry
    HttpReply last_reply = {};
  };
  std::vector<Oracle> live;
  std::mt19937_64 rng(11);
  const size_t H = test::kDemoHidden;
  ThreadPool pool(1);
  LocalFfn ffn(*model_, pool);
  Transformer fresh(*model_, ffn, pool);
  auto expected_rows = [&](const Oracle& o, size_t from) {  // the residual out of layers 0-2 for positions from…
    KvCache cache;
    std::vector<int> tokens(o.tokens.begin(), o.tokens.end());
    const SequenceChunk chunk{&cache, tokens, 0, from};
    std::vector<float> out;
    EXPECT_TRUE(fresh.forward_range({&chunk, 1}, 0, 2, o.x, out).ok());
    return out;
  };
  size_t checked = 0;
  for (int op = 0; op < 160; ++op) {
    const int dice = int(rng() % 100);
    if (live.empty() || dice < 8) {
      live.push_back({open_id(48)});
    } else if (dice < 14) {  // a fork at a legal position
      const Oracle& src = live[rng() % live.size()];
      const size_t p = src.tokens.size() - std::min<size_t>(src.tokens.size(), rng() % 4);
      HttpReply r = open(48, "", R"(, "fork": ")" + wire::session_id_hex(src.id) + R"(", "positions": )" + std::to_string(p));
      ASSERT_EQ(r.status, 201) << r.body;
      Oracle fork{*wire::parse_session_id(json::parse(r.body)["session"].get<std::string>())};
      fork.tokens.assign(src.tokens.begin(), src.tokens.begin() + long(p));
      fork.x.assign(src.x.begin(), src.x.begin() + long(p * H));
      live.push_back(std::move(fork));
    } else if (dice < 20) {  // a delete
      const size_t i = rng() % live.size();
      EXPECT_EQ(service_->close(wire::session_id_hex(live[i].id), "").status, 204);
      EXPECT_EQ(code(step({{live[i].id, live[i].step + 1, 0, 1, 0}})), "session_unknown");
      live.erase(live.begin() + long(i));
    } else if (dice < 28) {  // a retry of the last step: the same bytes back
      Oracle& o = live[rng() % live.size()];
      if (o.step == 0) continue;
      const HttpReply again = service_->walk_layers(o.last_body, kF32, kF32, "");
      ASSERT_EQ(again.status, 200) << again.body;
      EXPECT_TRUE(again.body.substr(8) == o.last_reply.body.substr(8));
    } else if (dice < 34) {  // a late duplicate of an older step
      Oracle& o = live[rng() % live.size()];
      if (o.step < 2) continue;
      EXPECT_EQ(code(step({{o.id, o.step - 1, 0, 1, 0}})), "stale_step");
    } else {  // the next step: from what it holds or a little back; sometimes it fails first
      Oracle& o = live[rng() % live.size()];
      const size_t held = o.tokens.size();
      const size_t start = held - std::min<size_t>(held, rng() % 3);
      const uint32_t rows = uint32_t(std::min<size_t>(1 + rng() % 4, 48 - start));
      if (rows == 0) continue;
      const uint32_t out_from = uint32_t(rng() % (rows + 1));
      std::vector<uint32_t> tokens(rows);
      for (uint32_t& t : tokens) t = uint32_t(rng() % 500);
      std::vector<float> x(rows * H);
      std::normal_distribution<float> value(0, 0.5f);
      for (float& v : x) v = value(rng);
      const SessionStep st{o.id, o.step + 1, uint32_t(start), rows, out_from};
      std::string request;
      ASSERT_TRUE(wire::encode_walk_layers_request(Encoding::f32, {&st, 1}, tokens, H, x, request).ok());
      if (rng() % 6 == 0) {  // a deadline passed: refused, the session accepts the retry
        EXPECT_EQ(service_->walk_layers(request, kF32, kF32, "", {}, std::chrono::steady_clock::now() - std::chrono::seconds(1)).status, 504);
      }
      const HttpReply r = service_->walk_layers(request, kF32, kF32, "");
      ASSERT_EQ(r.status, 200) << r.body;
      o.tokens.resize(start), o.x.resize(start * H);
      o.tokens.insert(o.tokens.end(), tokens.begin(), tokens.end());
      o.x.insert(o.x.end(), x.begin(), x.end());
      o.step = st.step, o.last_body = request, o.last_reply = r;
      const std::vector<float> want = expected_rows(o, start + out_from);
      ASSERT_EQ(r.body.size(), 8 + want.size() * 4);
      if (!want.empty()) {
        EXPECT_EQ(std::memcmp(r.body.data() + 8, want.data(), want.size() * 4), 0) << "op " << op;
      }
      ++checked;
    }
  }
  EXPECT_GT(checked, 40u);
}

TEST_F(SessionServiceTest, OpenRefusesBadMaxPositionsNamingTheBound) {
  HttpReply zero = open(0);
  EXPECT_EQ(code(zero), "bad_max_positions");
  EXPECT_NE(zero.body.find("1 to " + std::to_string(model_->config.context)), std::string::npos) << zero.body;
  EXPECT_EQ(code(open(model_->config.context + 1)), "bad_max_positions");
  EXPECT_EQ(service_->open("{}", "text/plain", "").status, 415);
}

}  // namespace
}  // namespace larql
