#include "kernels/thread_pool.h"

#include <algorithm>
#include <chrono>

namespace larql {
namespace {

// How long an idle worker spins before it sleeps; short enough not to steal a core from
// other processes between requests, long enough to bridge the gaps inside a token.
constexpr auto kSpin = std::chrono::microseconds(200);

inline void cpu_relax() {
#if defined(__x86_64__)
  __builtin_ia32_pause();
#endif
}

}  // namespace

ThreadPool::ThreadPool(size_t threads) {
  const size_t n = std::max<size_t>(threads, 1);
  for (size_t i = 1; i < n; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::parallel_for(size_t n, const std::function<void(size_t, size_t)>& fn, size_t grain) {
  if (n == 0) return;
  grain = std::max<size_t>(grain, 1);
  size_t chunk = (n + size() - 1) / size();
  chunk = (chunk + grain - 1) / grain * grain;
  if (workers_.empty() || chunk >= n) {
    fn(0, n);
    return;
  }
  {
    std::lock_guard lock(mutex_);
    job_ = &fn;
    job_n_ = n;
    job_chunk_ = chunk;
    pending_.store(workers_.size(), std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  fn(0, std::min(chunk, n));  // the caller's share is chunk 0
  while (pending_.load(std::memory_order_acquire) != 0) cpu_relax();
}

void ThreadPool::worker_loop(size_t index) {
  size_t seen = 0;
  for (;;) {
    // Spin for new work first, then sleep until it comes. The clock is read once per 64
    // pauses: in a VM each read can cost as much as the pauses themselves.
    const auto spin_until = std::chrono::steady_clock::now() + kSpin;
    for (size_t spins = 1; generation_.load(std::memory_order_acquire) == seen && !stopping_.load(std::memory_order_relaxed);
         ++spins) {
      cpu_relax();
      if (spins % 64 == 0 && std::chrono::steady_clock::now() >= spin_until) break;
    }
    const std::function<void(size_t, size_t)>* job;
    size_t begin, end;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || generation_.load(std::memory_order_relaxed) != seen; });
      if (stopping_) return;
      seen = generation_.load(std::memory_order_relaxed);
      job = job_;
      begin = std::min(index * job_chunk_, job_n_);
      end = std::min(begin + job_chunk_, job_n_);
    }
    if (begin < end) (*job)(begin, end);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

}  // namespace larql
