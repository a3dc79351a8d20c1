// The pool runs every chunk of every job exactly once, whoever claims it (a worker, or the
// caller when the worker is slow to wake), and the chunks are the same fixed ranges.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

#include "kernels/thread_pool.h"

namespace larql {
namespace {

TEST(ThreadPool, EveryIndexOfEveryJobRunsExactlyOnceInFixedChunks) {
  for (size_t threads : {2, 3, 5}) {
    ThreadPool pool(threads);
    for (size_t job = 0; job < 3000; ++job) {  // back to back: late workers meet the next job
      const size_t n = 1 + job % 97, grain = 1 + job % 4, per_thread = 1 + job % 5;
      std::vector<std::atomic<int>> hits(n);
      std::mutex mutex;
      std::set<std::pair<size_t, size_t>> chunks;
      pool.parallel_for(n, [&](size_t begin, size_t end) {
        for (size_t i = begin; i < end; ++i) hits[i].fetch_add(1);
        std::lock_guard lock(mutex);
        chunks.insert({begin, end});
      }, grain, per_thread);
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "threads " << threads << ", n " << n << ", index " << i;
      // The split is a function of n, grain, chunks per thread and the pool's size only.
      size_t chunk = (n + threads * per_thread - 1) / (threads * per_thread);
      chunk = (chunk + grain - 1) / grain * grain;
      std::set<std::pair<size_t, size_t>> expected;
      for (size_t b = 0; b < n; b += chunk) expected.insert({b, std::min(b + chunk, n)});
      ASSERT_EQ(chunks, expected) << "threads " << threads << ", n " << n << ", grain " << grain << ", per thread " << per_thread;
    }
  }
}

}  // namespace
}  // namespace larql
