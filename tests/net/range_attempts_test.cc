// PROTOCOL §9's rules for one range without sockets (net/range_attempts.h): how a call is
// classified, the budget of a try, and the sequence of tries, driven by scripted calls.
#include "net/range_attempts.h"

#include <gtest/gtest.h>

#include <vector>

namespace larql {
namespace {

using Kind = CallResult::Kind;
using Clock = std::chrono::steady_clock;

Result<HttpResponse> response(int status, std::string body = "{}", HttpHeaders headers = {}) {
  HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  r.headers = std::move(headers);
  return r;
}

TEST(RangeAttempts, CallsAreClassifiedAsSection9Says) {
  EXPECT_EQ(classify_call(response(200), false).kind, Kind::answer);
  EXPECT_EQ(classify_call(response(400), false).kind, Kind::answer) << "the caller's error passes on";
  EXPECT_EQ(classify_call(response(500, R"({"code":"non_finite_output"})"), false).kind, Kind::answer)
      << "every replica would compute the same";
  const CallResult other500 = classify_call(response(500, R"({"code":"internal"})"), false);
  EXPECT_EQ(other500.kind, Kind::failed);
  EXPECT_EQ(other500.note, " (HTTP 500)");
  EXPECT_EQ(classify_call(response(502), false).kind, Kind::failed);
  const CallResult busy = classify_call(response(503, "{}", {{"Retry-After", "7"}}), false);
  EXPECT_EQ(busy.kind, Kind::busy);
  EXPECT_EQ(busy.retry_after_s, 7);
  const CallResult timeout = classify_call(make_error(ErrorCode::shard_timeout, "timed out"), false);
  EXPECT_EQ(timeout.kind, Kind::failed);
  EXPECT_TRUE(timeout.timed_out);
  const CallResult short_of_fds = classify_call(make_error(ErrorCode::shard_unavailable, "Too many open files"), true);
  EXPECT_EQ(short_of_fds.kind, Kind::busy) << "the router's own shortage is not the replica's fault";
  EXPECT_EQ(short_of_fds.retry_after_s, 1);
}

TEST(RangeAttempts, ATryGetsTheTimeoutCappedByTheCallersDeadline) {
  const auto now = Clock::now();
  EXPECT_EQ(try_budget(5000, std::nullopt, now), 5000);
  EXPECT_EQ(try_budget(5000, now + std::chrono::milliseconds(300), now), 300);
  EXPECT_EQ(try_budget(200, now + std::chrono::milliseconds(300), now), 200);
  EXPECT_EQ(try_budget(5000, now, now), std::nullopt);
  EXPECT_EQ(try_budget(5000, now - std::chrono::milliseconds(1), now), std::nullopt);
}

// Replicas a, b, c, … answering as scripted; records who was called with what budget.
struct Script {
  explicit Script(std::vector<Result<HttpResponse>> scripted = {}) : answers(std::move(scripted)) {}
  std::vector<Result<HttpResponse>> answers;
  std::vector<size_t> called;
  std::vector<int64_t> budgets;
  std::vector<std::optional<int64_t>> budget_left;  // what budget() says before each try; empty: 1000
  size_t budget_calls = 0, retries = 0;

  RangeResult run() {
    RangeAttempts attempts("0-2");
    return try_in_order(
        0, answers.size(), attempts, [](size_t i) { return std::string("http://") + char('a' + i); },
        [&]() -> std::optional<int64_t> {
          const size_t k = budget_calls++;
          return k < budget_left.size() ? budget_left[k] : std::optional<int64_t>(1000);
        },
        [&](size_t i, int64_t budget) {
          called.push_back(i);
          budgets.push_back(budget);
          return classify_call(answers[i], false);
        },
        [&] { ++retries; });
  }
};

TEST(RangeAttempts, ABusyReplicaGetsOneMoreTryElsewhere) {
  Script s({response(503, "{}", {{"Retry-After", "3"}}), response(200, "answer")});
  const RangeResult r = s.run();
  ASSERT_TRUE(r.answer);
  EXPECT_EQ(r.replica, 1u);
  EXPECT_EQ(r.answer->body, "answer");
  EXPECT_EQ(s.retries, 1u);
}

TEST(RangeAttempts, TwoBusyRepliesEndIn503WithTheSmallestRetryAfterNot502) {
  Script s({response(503, "{}", {{"Retry-After", "5"}}), response(503, "{}", {{"Retry-After", "2"}}), response(200)});
  const RangeResult r = s.run();
  ASSERT_TRUE(r.error);
  EXPECT_EQ(r.error->code, ErrorCode::overloaded);
  EXPECT_EQ(r.retry_after_s, 2);
  EXPECT_EQ(s.called, (std::vector<size_t>{0, 1})) << "busy is not broken: no third try";
  EXPECT_NE(r.error->message.find("http://a (busy), http://b (busy)"), std::string::npos) << r.error->message;
}

TEST(RangeAttempts, FailuresMoveOnAndEndIn502NamingEveryReplica) {
  Script s({response(502), make_error(ErrorCode::shard_unavailable, "connection refused")});
  const RangeResult r = s.run();
  ASSERT_TRUE(r.error);
  EXPECT_EQ(r.error->code, ErrorCode::shard_unavailable);
  EXPECT_NE(r.error->message.find("http://a (HTTP 502), http://b (connection refused)"), std::string::npos) << r.error->message;
  EXPECT_EQ(r.retry_after_s, 0);

  Script timed_out({response(502), make_error(ErrorCode::shard_timeout, "timed out")});
  EXPECT_EQ(timed_out.run().error->code, ErrorCode::shard_timeout) << "the last try timed out: 504";
}

TEST(RangeAttempts, CallersErrorsAndDeterministicFailuresPassOnAtOnce) {
  for (auto answer : {response(400, R"({"code":"bad_request"})"), response(500, R"({"code":"non_finite_output"})")}) {
    Script s({answer, response(200)});
    const RangeResult r = s.run();
    ASSERT_TRUE(r.answer);
    EXPECT_EQ(r.answer->status, answer->status);
    EXPECT_EQ(s.called, std::vector<size_t>{0});
    EXPECT_EQ(s.retries, 0u);
  }
}

TEST(RangeAttempts, EachTryGetsWhatIsLeftAndThePassedDeadlineEndsTheSequence) {
  Script s({response(502), response(502), response(200)});
  s.budget_left = {800, 350, std::nullopt};
  const RangeResult r = s.run();
  EXPECT_EQ(s.budgets, (std::vector<int64_t>{800, 350}));
  ASSERT_TRUE(r.error);
  EXPECT_EQ(r.error->code, ErrorCode::deadline_exceeded);
  EXPECT_NE(r.error->message.find("tried http://a (HTTP 502), http://b (HTTP 502)"), std::string::npos) << r.error->message;
}

TEST(RangeAttempts, ARangeWithoutReplicasSaysSo) {
  Script s;
  const RangeResult r = s.run();
  ASSERT_TRUE(r.error);
  EXPECT_EQ(r.error->code, ErrorCode::shard_unavailable);
  EXPECT_NE(r.error->message.find("no replica is mapped"), std::string::npos);
}

// A clock for a HedgeRace that runs on scripted time: call i finishes `after` ms after it
// starts, with its result; a wait moves time to the next finish or to the wait's end.
class FakeRaceClock : public RaceClock {
 public:
  FakeRaceClock(HedgeRace& race, std::vector<std::pair<double, CallResult>> script)
      : race_(race), script_(std::move(script)), start_ms_(script_.size(), -1), delivered_(script_.size(), false) {}
  void started(size_t call) { start_ms_[call] = now; }
  bool wait(std::unique_lock<std::mutex>&, std::condition_variable&, double ms, const std::function<bool()>& done) override {
    const double until = ms < 0 ? 1e300 : now + ms;
    while (!done()) {
      size_t next = script_.size();
      for (size_t c = 0; c < script_.size(); ++c)
        if (start_ms_[c] >= 0 && !delivered_[c] && (next == script_.size() || finish_at(c) < finish_at(next))) next = c;
      if (next == script_.size() || finish_at(next) > until) {
        if (ms < 0) return false;  // nothing left to finish: a real race would wait for the timeout
        now = until;
        return false;
      }
      now = finish_at(next);
      delivered_[next] = true;
      race_.finish_locked(next, script_[next].second);
    }
    return true;
  }
  double now = 0;

 private:
  double finish_at(size_t c) const { return start_ms_[c] + script_[c].first; }
  HedgeRace& race_;
  std::vector<std::pair<double, CallResult>> script_;
  std::vector<double> start_ms_;
  std::vector<bool> delivered_;
};

struct HedgeRun {
  RangeResult result;
  size_t started = 0, hedges = 0;
  double hedged_at = -1, ended_at = 0;
  std::string tried;  // the error's message, when no call answered
};

HedgeRun race(double after_ms, std::vector<std::pair<double, Result<HttpResponse>>> calls) {
  std::vector<std::pair<double, CallResult>> script;
  for (auto& [ms, response] : calls) script.emplace_back(ms, classify_call(response, false));
  HedgeRace hedge_race;
  FakeRaceClock clock(hedge_race, std::move(script));
  RangeAttempts attempts("0-2");
  HedgeRun run;
  run.result = hedge_race.run(
      after_ms, [&](size_t i) { clock.started(i); }, [&] { ++run.hedges, run.hedged_at = clock.now; }, attempts,
      [](size_t i) { return std::string("http://") + char('a' + i); }, clock);
  run.started = hedge_race.started();
  run.ended_at = clock.now;
  if (run.result.error) run.tried = run.result.error->message;
  return run;
}

TEST(HedgeRace, AFirstAnswerWithinTheDelayIsNotHedged) {
  const HedgeRun r = race(10, {{5, response(200, "a")}, {1, response(200, "b")}});
  ASSERT_TRUE(r.result.answer);
  EXPECT_EQ(r.result.replica, 0u);
  EXPECT_EQ(r.hedges, 0u);
  EXPECT_EQ(r.started, 1u);
  EXPECT_EQ(r.ended_at, 5);
}

TEST(HedgeRace, ASlowFirstCallIsHedgedAtTheDelayAndTheSecondWins) {
  const HedgeRun r = race(10, {{100, response(200, "a")}, {3, response(200, "b")}});
  ASSERT_TRUE(r.result.answer);
  EXPECT_EQ(r.result.replica, 1u);
  EXPECT_EQ(r.result.answer->body, "b");
  EXPECT_EQ(r.hedges, 1u);
  EXPECT_EQ(r.hedged_at, 10);
  EXPECT_EQ(r.ended_at, 13) << "the answer is taken when it comes, not when the first call ends";
}

TEST(HedgeRace, AFailedHedgeWaitsForTheFirstCall) {
  const HedgeRun r = race(10, {{40, response(200, "a")}, {5, response(503, "{}", {{"Retry-After", "2"}})}});
  ASSERT_TRUE(r.result.answer);
  EXPECT_EQ(r.result.replica, 0u);
  EXPECT_EQ(r.hedges, 1u);
  EXPECT_EQ(r.ended_at, 40);
}

TEST(HedgeRace, AFirstCallThatFailsBeforeTheDelayIsNotHedgedAndTheSequenceGoesOn) {
  const HedgeRun r = race(10, {{2, response(502)}, {1, response(200)}});
  EXPECT_FALSE(r.result.answer);
  EXPECT_EQ(r.started, 1u) << "the router goes on in turn from the second replica";
  EXPECT_EQ(r.hedges, 0u);
  EXPECT_NE(r.tried.find("http://a (HTTP 502)"), std::string::npos) << r.tried;
}

TEST(HedgeRace, TwoFailuresAreBothNamed) {
  const HedgeRun r = race(10, {{30, make_error(ErrorCode::shard_timeout, "timed out")}, {2, response(500, R"({"code":"internal"})")}});
  EXPECT_FALSE(r.result.answer);
  EXPECT_EQ(r.started, 2u);
  EXPECT_NE(r.tried.find("http://b (HTTP 500), http://a (timed out)"), std::string::npos) << r.tried;
  EXPECT_EQ(r.result.error->code, ErrorCode::shard_timeout) << "the last to fail timed out";
}

}  // namespace
}  // namespace larql
