// Who runs next on the engine: one request at a time, the others waiting in arrival order
// in a bounded queue. A request whose client leaves while waiting gives its place up at
// once. (Continuous batching will run several turns at once behind the same interface.)
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <utility>

namespace larql {

class RequestQueue {
 public:
  explicit RequestQueue(size_t max_waiting) : max_waiting_(max_waiting) {}

  // Held while a request runs; releasing it lets the next one in.
  class Turn {
   public:
    explicit Turn(RequestQueue& q) : queue_(&q) {}
    Turn(Turn&& other) noexcept : queue_(std::exchange(other.queue_, nullptr)) {}
    Turn(const Turn&) = delete;
    ~Turn() {
      if (queue_) queue_->release();
    }

   private:
    RequestQueue* queue_;
  };

  enum class Refusal { none, full, client_gone };
  // Waits for this request's turn. `client_gone` is polled while waiting.
  std::unique_ptr<Turn> wait_turn(const std::function<bool()>& client_gone, Refusal& refusal);

  size_t waiting() const;
  bool running() const;

 private:
  void release();

  const size_t max_waiting_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<uint64_t> waiting_;
  uint64_t next_ = 0;
  bool running_ = false;
};

}  // namespace larql
