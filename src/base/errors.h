// Protocol error codes (PROTOCOL.md §7) and the small result type every decoder,
// loader and route returns. Our own type instead of std::expected: Debian's clang 14
// (needed for libFuzzer) cannot compile std::expected against libstdc++ 12.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace larql {

enum class ErrorCode {
  truncated,
  bad_length,
  bad_seq_len,
  bad_layer_count,
  full_output_required,
  non_finite_input,
  bad_i8_block,
  bad_q8_block,
  invalid_json,
  layer_out_of_range,
  layer_not_owned,
  no_owning_shard,
  unauthorized,
  not_found,
  method_not_allowed,
  body_too_large,
  unsupported_media_type,
  overloaded,
  non_finite_output,
  internal,
  shard_unavailable,
  shard_timeout,
  duplicate_layer,   // a batch names the same layer twice
  work_too_large,    // positions × layers above the server's --max-work
  deadline_exceeded, // the caller's X-Larql-Deadline-Ms passed before the work finished
  bad_request,       // malformed HTTP (request line, headers, framing); 408 for a late request head
  cancelled,         // the client closed its connection; the work was dropped (never sent)
  invalid_argument,  // local misuse (configuration, CLI); never sent on the wire
  expert_not_owned,  // /v1/walk-experts names an expert outside this shard's range (§12)
  bad_assignment,    // /v1/walk-experts' assignments break §12's rules
  not_moe_layer,     // /v1/walk-experts for a layer without routed experts
  // Layer-range sessions (§13)
  session_unknown,   // 410: no such session (never opened, closed, expired, or another key's)
  session_lost,      // 410: a router's session lost a part's cache
  bad_position,      // 409: a step's start is not a legal one for the session
  stale_step,        // 409: a step number that is neither the next nor a retry of the last
  context_full,      // start + rows beyond the session's max_positions
  bad_max_positions, // an open's max_positions outside 1..the shard's bound
  duplicate_session, // a walk-layers request names one session twice
  bad_token,         // a token id ≥ the vocabulary
  bad_sequence_count,// n = 0, above --max-sessions, or more entries than the body holds
  bad_flags,         // walk-layers flags other than 1
};

// The `code` string of an error body, e.g. "bad_i8_block".
std::string_view error_code_name(ErrorCode code);

// The HTTP status PROTOCOL §7 assigns to the code.
int http_status(ErrorCode code);

struct Error {
  ErrorCode code;
  std::string message;
};

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : state_(std::move(value)) {}         // NOLINT: implicit by design
  Result(Error error) : state_(std::move(error)) {}     // NOLINT: implicit by design

  bool ok() const { return state_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { return std::get<0>(state_); }
  const T& value() const& { return std::get<0>(state_); }
  T&& value() && { return std::get<0>(std::move(state_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  const Error& error() const { return std::get<1>(state_); }

 private:
  std::variant<T, Error> state_;
};

struct Ok {};
using Status = Result<Ok>;

inline Error make_error(ErrorCode code, std::string message) {
  return Error{code, std::move(message)};
}

}  // namespace larql
