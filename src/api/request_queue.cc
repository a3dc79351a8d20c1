#include "api/request_queue.h"

#include <algorithm>
#include <chrono>

namespace larql {

std::unique_ptr<RequestQueue::Turn> RequestQueue::wait_turn(const std::function<bool()>& client_gone, Refusal& refusal) {
  std::unique_lock lock(mutex_);
  refusal = Refusal::none;
  if (running_ && waiting_.size() >= max_waiting_) {
    refusal = Refusal::full;
    return nullptr;
  }
  const uint64_t me = next_++;
  waiting_.push_back(me);
  // Bounded waits: the client's departure is noticed within 50 ms (it has no event to wake us).
  while (running_ || waiting_.front() != me) {
    if (client_gone && client_gone()) {
      waiting_.erase(std::find(waiting_.begin(), waiting_.end(), me));
      changed_.notify_all();
      refusal = Refusal::client_gone;
      return nullptr;
    }
    changed_.wait_for(lock, std::chrono::milliseconds(50));
  }
  waiting_.pop_front();
  running_ = true;
  return std::make_unique<Turn>(*this);
}

void RequestQueue::release() {
  std::lock_guard lock(mutex_);
  running_ = false;
  changed_.notify_all();
}

size_t RequestQueue::waiting() const {
  std::lock_guard lock(mutex_);
  return waiting_.size();
}

bool RequestQueue::running() const {
  std::lock_guard lock(mutex_);
  return running_;
}

}  // namespace larql
