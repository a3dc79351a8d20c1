// Starting `larql serve` / `larql router` as child processes on free ports: for
// `larql demo`, the benchmarks and the integration tests. The child's start-up line says
// which port it got ("listening on http[s]://HOST:PORT"); nothing here sleeps to wait.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "base/errors.h"

namespace larql {

struct SpawnedServer {
  pid_t pid = -1;
  std::string url;           // e.g. http://127.0.0.1:40409
  std::string startup_text;  // what it printed up to and including that line
  int stdout_fd = -1;        // the read end of its stdout; keep it open while it runs, close it after
};

// Runs `binary args...` with stdout piped and waits, up to `deadline`, for its start-up
// line. On failure the child is killed and reaped, and the error says what it printed.
Result<SpawnedServer> spawn_server(const std::string& binary, const std::vector<std::string>& args,
                                   std::chrono::milliseconds deadline);

// Polls GET /v1/health until it answers 200, the deadline passes, or `keep_waiting`
// returns false.
bool wait_healthy(const std::string& url, std::chrono::milliseconds deadline,
                  const std::function<bool()>& keep_waiting = {});

}  // namespace larql
