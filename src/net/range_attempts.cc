#include "net/range_attempts.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "net/http_reply.h"

namespace larql {

std::string error_code_of(const std::string& body) {
  const auto j = nlohmann::json::parse(body, nullptr, false);
  return j.is_object() && j.contains("code") && j["code"].is_string() ? j["code"].get<std::string>() : std::string();
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

}  // namespace larql
