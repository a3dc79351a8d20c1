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
  const size_t n = std::clamp<size_t>(threads, 1, 0xffff);  // chunk counts fit the claim word's 16 bits
  for (size_t i = 1; i < n; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::parallel_for(size_t n, const std::function<void(size_t, size_t)>& fn, size_t grain, size_t chunks_per_thread) {
  if (n == 0) return;
  grain = std::max<size_t>(grain, 1);
  const size_t chunks = std::min<size_t>(size() * std::max<size_t>(chunks_per_thread, 1), 0xffff);  // the claim word's 16 bits
  size_t chunk = (n + chunks - 1) / chunks;
  chunk = (chunk + grain - 1) / grain * grain;
  if (workers_.empty() || chunk >= n) {
    fn(0, n);
    return;
  }
  uint32_t generation;
  resting_.store(false, std::memory_order_relaxed);
  {
    std::lock_guard lock(mutex_);
    job_ = &fn;
    job_n_ = n;
    job_chunk_ = chunk;
    job_chunks_ = (n + chunk - 1) / chunk;
    done_.store(0, std::memory_order_relaxed);
    generation = generation_.load(std::memory_order_relaxed) + 1;
    claim_.store(uint64_t(generation) << 32 | uint64_t(job_chunks_) << 16, std::memory_order_release);
    generation_.store(generation, std::memory_order_release);
  }
  wake_.notify_all();
  run_chunks(generation);
  while (done_.load(std::memory_order_acquire) != job_chunks_) cpu_relax();
}

void ThreadPool::run_chunks(uint32_t generation) {
  for (;;) {
    uint64_t state = claim_.load(std::memory_order_acquire);
    size_t index;
    do {
      index = size_t(state & 0xffffu);
      if (uint32_t(state >> 32) != generation || index >= size_t((state >> 16) & 0xffffu)) return;
    } while (!claim_.compare_exchange_weak(state, state + 1, std::memory_order_acq_rel, std::memory_order_acquire));
    // Claimed: the job cannot end (nor its fields change) before this chunk is done.
    const size_t begin = index * job_chunk_, end = std::min(begin + job_chunk_, job_n_);
    (*job_)(begin, end);
    done_.fetch_add(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::worker_loop() {
  uint32_t seen = 0;
  for (;;) {
    // Spin for new work first, then sleep until it comes. The clock is read once per 64
    // pauses: in a VM each read can cost as much as the pauses themselves.
    const auto spin_until = std::chrono::steady_clock::now() + kSpin;
    for (size_t spins = 1; generation_.load(std::memory_order_acquire) == seen && !stopping_.load(std::memory_order_relaxed) &&
                           !resting_.load(std::memory_order_relaxed);
         ++spins) {
      cpu_relax();
      if (spins % 64 == 0 && std::chrono::steady_clock::now() >= spin_until) break;
    }
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || generation_.load(std::memory_order_relaxed) != seen; });
      if (stopping_) return;
      seen = generation_.load(std::memory_order_relaxed);
    }
    run_chunks(seen);
  }
}

}  // namespace larql
