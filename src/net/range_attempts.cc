#include "net/range_attempts.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "net/http_reply.h"

namespace larql {

std::string error_code_of(const std::string& body) {
  const auto j = nlohmann::json::parse(body, nullptr, false);
  return j.is_object() && j.contains("code") && j["code"].is_string() ? j["code"].get<std::string>() : std::string();
}

std::string describe_call(const Result<HttpResponse>& res) {
  if (!res) return res.error().message;
  std::string detail = res->body;
  const auto j = nlohmann::json::parse(res->body, nullptr, false);
  if (!j.is_discarded() && j.is_object() && j.contains("error"))
    detail = j["error"].dump() + " (" + (j.contains("code") ? j["code"].dump() : std::string("no code")) + ")";
  return "HTTP " + std::to_string(res->status) + ": " + detail.substr(0, 300);
}

CallResult classify_call(const Result<HttpResponse>& response, bool own_shortage) {
  using Kind = CallResult::Kind;
  CallResult r;
  if (!response) {
    if (own_shortage) {
      r.kind = Kind::busy;
      r.note = " (the router is short of file descriptors)";
      r.retry_after_s = 1;
      return r;
    }
    r.kind = Kind::failed;
    r.note = " (" + response.error().message + ")";
    r.timed_out = response.error().code == ErrorCode::shard_timeout;
    return r;
  }
  if (response->status == 503) {
    r.kind = Kind::busy;
    r.note = " (busy)";
    r.retry_after_s = response->retry_after_s();
    return r;
  }
  const bool deterministic =
      response->status == 500 && error_code_of(response->body) == error_code_name(ErrorCode::non_finite_output);
  if (response->status >= 500 && !deterministic) {
    r.kind = Kind::failed;
    r.note = " (HTTP " + std::to_string(response->status) + ")";
    return r;
  }
  r.kind = Kind::answer;
  r.response = *response;
  return r;
}

std::optional<int64_t> try_budget(int timeout_ms, std::optional<std::chrono::steady_clock::time_point> deadline,
                                  std::chrono::steady_clock::time_point now) {
  int64_t ms = timeout_ms;
  if (deadline) ms = std::min<int64_t>(ms, std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - now).count());
  if (ms <= 0) return std::nullopt;
  return ms;
}

void RangeAttempts::note(const std::string& url, const CallResult& result) {
  tried_ += (tried_.empty() ? "" : ", ") + url + result.note;
  if (result.kind == CallResult::Kind::busy) {
    ++busy_;
    retry_after_s_ = retry_after_s_ == 0 ? result.retry_after_s : std::min(retry_after_s_, result.retry_after_s);
  } else {
    last_timed_out_ = result.timed_out;
  }
}

Error RangeAttempts::deadline_passed() const {
  return make_error(ErrorCode::deadline_exceeded, "the caller's deadline (" + std::string(kDeadlineHeader) +
                                                      ") passed before layers " + range_ + " were answered" +
                                                      (tried_.empty() ? "" : "; tried " + tried_));
}

Error RangeAttempts::exhausted() const {
  if (busy_ > 0)
    return make_error(ErrorCode::overloaded, "every replica of layers " + range_ + " tried is busy: " + tried_ + "; retry later");
  return make_error(last_timed_out_ ? ErrorCode::shard_timeout : ErrorCode::shard_unavailable,
                    "every replica of layers " + range_ + " failed: " + (tried_.empty() ? "no replica is mapped" : tried_));
}

RangeResult try_in_order(size_t first, size_t count, RangeAttempts& attempts, const std::function<std::string(size_t)>& url_of,
                         const std::function<std::optional<int64_t>()>& budget,
                         const std::function<CallResult(size_t, int64_t)>& call, const std::function<void()>& on_retry) {
  for (size_t i = first; i < count && attempts.may_try_another(); ++i) {
    const auto left = budget();
    if (!left) return RangeResult::failed(attempts.deadline_passed());
    if (attempts.tried_any()) on_retry();
    CallResult r = call(i, *left);
    if (r.kind == CallResult::Kind::answer) return RangeResult::answered(i, std::move(*r.response));
    attempts.note(url_of(i), r);
  }
  const Error e = attempts.exhausted();
  return RangeResult::failed(e, e.code == ErrorCode::overloaded ? attempts.retry_after_s() : 0);
}

namespace {

class RealRaceClock : public RaceClock {
 public:
  bool wait(std::unique_lock<std::mutex>& lock, std::condition_variable& finished, double ms,
            const std::function<bool()>& done) override {
    if (ms < 0) {
      finished.wait(lock, done);
      return true;
    }
    return finished.wait_for(lock, std::chrono::duration<double, std::milli>(ms), done);
  }
};

}  // namespace

RaceClock& real_race_clock() {
  static RealRaceClock clock;
  return clock;
}

void HedgeRace::finish(size_t call, CallResult result) {
  std::lock_guard lock(mutex_);
  finished_.emplace_back(call, std::move(result));
  finished_one_.notify_all();
}

RangeResult HedgeRace::run(double after_ms, const std::function<void(size_t)>& start, const std::function<void()>& on_hedge,
                           RangeAttempts& attempts, const std::function<std::string(size_t)>& url_of, RaceClock& clock) {
  std::unique_lock lock(mutex_);
  start(0);
  started_ = 1;
  if (!clock.wait(lock, finished_one_, after_ms, [&] { return !finished_.empty(); })) {
    on_hedge();
    start(1);
    started_ = 2;
  }
  for (size_t seen = 0; seen < started_; ++seen) {
    // Each call ends by its timeout; only a fake clock with nothing left to finish says no.
    if (!clock.wait(lock, finished_one_, -1, [&] { return finished_.size() > seen; })) break;
    auto& [call, result] = finished_[seen];
    if (result.kind == CallResult::Kind::answer) return RangeResult::answered(call, std::move(*result.response));
    attempts.note(url_of(call), result);
  }
  return RangeResult::failed(attempts.exhausted());
}

}  // namespace larql
