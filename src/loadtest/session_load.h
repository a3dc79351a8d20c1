// `larql loadtest --sessions`: traffic of layer-range sessions (PROTOCOL §13) against a session
// shard: each client opens sessions, steps them (going back now and then, as rejected drafts
// do), forks them, deletes some and abandons others to the idle timeout, and sends malformed
// bodies (truncated, reserved flags, an unknown id, a stale step, one session named twice)
// whose 4xx it checks by code. Every answer is counted by status and code; an answer that
// is neither a 2xx nor the 4xx a malformed body asked for is unexpected.
#pragma once

#include <cstddef>
#include <map>
#include <string>

#include "base/errors.h"
#include "loadtest/load_generator.h"

namespace larql::loadtest {

struct SessionLoadReport {
  double seconds = 0;
  size_t opens = 0, forks = 0, steps = 0, deletes = 0, abandoned = 0, malformed = 0;
  std::map<std::string, size_t> answers;  // "200", "409 stale_step (asked for)", "503 overloaded", …
  size_t unexpected = 0;
  LatencyMs step_latency;
};

Result<SessionLoadReport> run_session_load(const LoadOptions& options, const Target& target);

// The shard's open sessions and KV bytes (its /v1/stats "sessions" object).
struct SessionMemory {
  size_t open = 0, kv_bytes = 0, reserved_bytes = 0;
};
Result<SessionMemory> read_session_memory(const LoadOptions& options);

}  // namespace larql::loadtest
