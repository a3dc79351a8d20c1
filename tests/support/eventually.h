// Waiting for a condition in a test: poll it with a deadline, never sleep a fixed time.
#pragma once

#include <chrono>
#include <thread>

namespace larql::test {

// Polls until `done` or the deadline; returns whether it came true.
template <class F>
bool eventually(F done, std::chrono::seconds deadline = std::chrono::seconds(30)) {
  const auto until = std::chrono::steady_clock::now() + deadline;
  while (std::chrono::steady_clock::now() < until) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // polling a condition, not synchronising on time
  }
  return done();
}

}  // namespace larql::test
