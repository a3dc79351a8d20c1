// PROTOCOL §9's rules for one layer range, apart from sockets: how one call to a replica is
// classified, the budget of each try, and the sequence of tries over a range's replicas,
// which ends in a domain result (an answer to pass on, or an error with its code). The
// router maps that result to HTTP in one place; tests drive the rules with scripted calls.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <utility>
#include <vector>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "base/errors.h"
#include "net/http_client.h"

namespace larql {

// The `code` of a PROTOCOL §7 error body, or "".
std::string error_code_of(const std::string& body);

// What a call came to, for an error message: the transport error, or the status with the
// body's error and code (its first 300 characters).
std::string describe_call(const Result<HttpResponse>& response);

// What one call to one replica came to.
struct CallResult {
  enum class Kind { answer, busy, failed } kind = Kind::failed;
  std::optional<HttpResponse> response;  // an answer, passed on as it is
  std::string note;                      // what the error message says about this replica
  bool timed_out = false;
  int retry_after_s = 0;
};

// §9: a 503 is busy (with its Retry-After); a 500 non_finite_output (every replica would
// compute it) and anything below 500 are answers to pass on; other 5xx and transport
// errors are failures, unless the router is itself short of descriptors (`own_shortage`),
// which makes a transport error the router's busyness, not the replica's fault.
CallResult classify_call(const Result<HttpResponse>& response, bool own_shortage);

// Milliseconds the next try may take: --timeout-ms, capped by what is left of the caller's
// deadline at `now`; none once it has passed.
std::optional<int64_t> try_budget(int timeout_ms, std::optional<std::chrono::steady_clock::time_point> deadline,
                                  std::chrono::steady_clock::time_point now);

// The tries of one range so far, and the error they add up to.
class RangeAttempts {
 public:
  explicit RangeAttempts(std::string range) : range_(std::move(range)) {}
  // A call that did not answer: named in the error; busy or failed.
  void note(const std::string& url, const CallResult& result);
  bool tried_any() const { return !tried_.empty(); }
  // One more try after a busy one, none after a second (busy is not broken: §9).
  bool may_try_another() const { return busy_ < 2; }
  Error deadline_passed() const;
  // With every try made: 503 overloaded if one was busy, else 504 or 502 naming them.
  Error exhausted() const;
  int retry_after_s() const { return retry_after_s_; }  // the smallest given, with overloaded

 private:
  std::string range_, tried_;
  int busy_ = 0, retry_after_s_ = 0;
  bool last_timed_out_ = false;
};

// The domain result for one range: who answered and what, or the error.
struct RangeResult {
  std::optional<size_t> replica;
  std::optional<HttpResponse> answer;
  std::optional<Error> error;
  int retry_after_s = 0;  // with an overloaded error

  static RangeResult answered(size_t replica, HttpResponse response) {
    RangeResult r;
    r.replica = replica;
    r.answer = std::move(response);
    return r;
  }
  static RangeResult failed(Error error, int retry_after_s = 0) {
    RangeResult r;
    r.error = std::move(error);
    r.retry_after_s = retry_after_s;
    return r;
  }
};

// How a race waits: until `done()` holds or `ms` milliseconds pass (ms < 0: no limit),
// with `lock` held around `done()`; returns done(). The real one waits on the race's
// condition variable; tests pass a fake that moves its own time and finishes calls.
class RaceClock {
 public:
  virtual ~RaceClock() = default;
  virtual bool wait(std::unique_lock<std::mutex>& lock, std::condition_variable& finished, double ms,
                    const std::function<bool()>& done) = 0;
};
RaceClock& real_race_clock();

// Hedging ("The Tail at Scale"): call 0 starts at once and, when it has not finished within
// `after_ms`, call 1 (the same idempotent request to the next replica); the first answer
// wins and a failure waits for the other. Calls run elsewhere (a thread each) and report
// with finish(); a loser's report after the race is over is dropped.
class HedgeRace {
 public:
  void finish(size_t call, CallResult result);
  // finish() for a caller that already holds the race's lock: a fake clock, inside wait().
  void finish_locked(size_t call, CallResult result) { finished_.emplace_back(call, std::move(result)); }
  // The winner and its answer, or none (every started call noted in `attempts`).
  // `start(i)` begins call i; `on_hedge` counts call 1's start.
  RangeResult run(double after_ms, const std::function<void(size_t)>& start, const std::function<void()>& on_hedge,
                  RangeAttempts& attempts, const std::function<std::string(size_t)>& url_of, RaceClock& clock);
  size_t started() const { return started_; }

 private:
  std::mutex mutex_;
  std::condition_variable finished_one_;
  std::vector<std::pair<size_t, CallResult>> finished_;  // (call, result) in finishing order
  size_t started_ = 0;
};

// The sequence: replicas [first, count) in order until one answers, a second is busy or
// the budget runs out. `call(i, budget_ms)` makes one try; `budget()` is try_budget now;
// `on_retry` counts the tries after the range's first.
RangeResult try_in_order(size_t first, size_t count, RangeAttempts& attempts, const std::function<std::string(size_t)>& url_of,
                         const std::function<std::optional<int64_t>()>& budget,
                         const std::function<CallResult(size_t, int64_t)>& call, const std::function<void()>& on_retry);

}  // namespace larql
