// A fixed pool of worker threads for data-parallel loops. The calling thread takes part,
// so a pool of N threads starts N-1 workers. Work is split into contiguous chunks in a
// fixed way, so results never depend on scheduling.
//
// Decode calls parallel_for about a hundred times per token, each a few hundred
// microseconds of work, so waking a sleeping thread each time would cost more than the
// work is worth: workers spin for a short while before they sleep.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace larql {

class ThreadPool {
 public:
  explicit ThreadPool(size_t threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  size_t size() const { return workers_.size() + 1; }

  // Calls fn(begin, end) over [0, n) split into size() contiguous chunks; returns when all
  // are done. Chunks are multiples of `grain` (except the last). Not reentrant: one
  // parallel_for at a time per pool.
  void parallel_for(size_t n, const std::function<void(size_t, size_t)>& fn, size_t grain = 1);

 private:
  void worker_loop(size_t index);

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  const std::function<void(size_t, size_t)>* job_ = nullptr;
  size_t job_n_ = 0;
  size_t job_chunk_ = 0;
  std::atomic<size_t> generation_{0};
  std::atomic<size_t> pending_{0};
  std::atomic<bool> stopping_{false};
};

}  // namespace larql
