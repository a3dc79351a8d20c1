// A mutex that hands itself out in arrival order (a ticket lock). The shard computes one
// layer at a time under it, and a request takes a new ticket for each of its layers, so
// requests take turns layer by layer: a one-layer request waits for at most one layer of
// a long batch, not for the whole batch (std::mutex lets the releasing thread re-take it).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace larql {

class FifoMutex {
 public:
  void lock() {
    std::unique_lock guard(mutex_);
    const uint64_t ticket = next_ticket_++;
    turn_.wait(guard, [&] { return serving_ == ticket; });
  }
  void unlock() {
    {
      std::lock_guard guard(mutex_);
      ++serving_;
    }
    turn_.notify_all();  // few waiters (bounded by the compute queue); each checks its ticket
  }

 private:
  std::mutex mutex_;
  std::condition_variable turn_;
  uint64_t next_ticket_ = 0, serving_ = 0;
};

}  // namespace larql
