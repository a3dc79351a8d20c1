// A fixed pool of worker threads for data-parallel loops. The calling thread takes part,
// so a pool of N threads starts N-1 workers. Work is split into contiguous chunks in a
// fixed way, so results never depend on scheduling (which thread runs a chunk may).
//
// Decode calls parallel_for about a hundred times per token, each a few hundred
// microseconds of work, so waking a sleeping thread each time would cost more than the
// work is worth: workers spin for a short while before they sleep. And chunks are claimed,
// not assigned: when a worker is slow to wake (after a network wait, in a VM), the caller
// takes its chunks instead of waiting for it.
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
  // The caller is about to wait on something else (a network round trip): idle workers
  // sleep now instead of spinning for the next job, leaving the cores to the processes
  // that will answer (a session shard on the same machine). The next job wakes them.
  void rest() { resting_.store(true, std::memory_order_relaxed); }

  // Calls fn(begin, end) over [0, n) split into size() · chunks_per_thread contiguous
  // chunks; returns when all are done. Chunks are multiples of `grain` (except the last).
  // Not reentrant: one parallel_for at a time per pool.
  void parallel_for(size_t n, const std::function<void(size_t, size_t)>& fn, size_t grain = 1, size_t chunks_per_thread = 1);

  // Row-wise work on `rows` rows of `row_values` values each: one chunk per thread, or on
  // the calling thread alone when there are fewer than kInlineValues values in all (a
  // decode step's row), which are not worth waking the workers for.
  static constexpr size_t kInlineValues = 1u << 14;
  void parallel_rows(size_t rows, size_t row_values, const std::function<void(size_t, size_t)>& fn) {
    if (rows * row_values < kInlineValues) fn(0, rows);
    else parallel_for(rows, fn);
  }

 private:
  void worker_loop();
  // Runs chunks of job `generation` until none is left to claim.
  void run_chunks(uint32_t generation);

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  const std::function<void(size_t, size_t)>* job_ = nullptr;
  size_t job_n_ = 0, job_chunk_ = 0, job_chunks_ = 0;
  std::atomic<uint32_t> generation_{0};
  // The job's generation (bits 32-63), its chunk count (16-31) and its next unclaimed
  // chunk (0-15), in one word: a worker that wakes after its job ended can neither claim
  // a chunk of the next one nor read the next one's fields.
  std::atomic<uint64_t> claim_{0};
  std::atomic<size_t> done_{0};  // chunks of the current job finished
  std::atomic<bool> stopping_{false};
  std::atomic<bool> resting_{false};  // rest()'s: no spinning until the next job
};

}  // namespace larql
