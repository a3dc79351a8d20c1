#include "kernels/thread_pool.h"

#include <algorithm>

namespace larql {

ThreadPool::ThreadPool(size_t threads) {
  const size_t n = std::max<size_t>(threads, 1);
  for (size_t i = 1; i < n; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  work_ready_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::parallel_for(size_t n, const std::function<void(size_t, size_t)>& fn, size_t grain) {
  if (n == 0) return;
  const size_t parts = size();
  grain = std::max<size_t>(grain, 1);
  size_t chunk = (n + parts - 1) / parts;
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
    pending_ = workers_.size();
    ++generation_;
  }
  work_ready_.notify_all();
  fn(0, std::min(chunk, n));  // the caller's share is chunk 0
  std::unique_lock lock(mutex_);
  work_done_.wait(lock, [this] { return pending_ == 0; });
  job_ = nullptr;
}

void ThreadPool::worker_loop(size_t index) {
  size_t seen = 0;
  for (;;) {
    const std::function<void(size_t, size_t)>* job;
    size_t begin, end;
    {
      std::unique_lock lock(mutex_);
      work_ready_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
      job = job_;
      begin = std::min(index * job_chunk_, job_n_);
      end = std::min(begin + job_chunk_, job_n_);
    }
    if (begin < end) (*job)(begin, end);
    {
      std::lock_guard lock(mutex_);
      if (--pending_ == 0) work_done_.notify_one();
    }
  }
}

}  // namespace larql
