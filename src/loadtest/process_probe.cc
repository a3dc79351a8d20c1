#include "loadtest/process_probe.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

namespace larql::loadtest {

ProcessSample sample_process(pid_t pid) {
  ProcessSample s;
  const std::filesystem::path proc = "/proc/" + std::to_string(pid);
  std::ifstream status(proc / "status");
  for (std::string line; std::getline(status, line);) {
    if (line.starts_with("State:") && line.find("zombie") != std::string::npos) return s;
    if (line.starts_with("VmRSS:")) s.rss_bytes = std::stoull(line.substr(6)) * 1024;  // "VmRSS:  1234 kB"
  }
  if (!status.eof()) return s;  // no such process
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator(proc / "fd", ec); !ec && it != std::filesystem::directory_iterator();
       it.increment(ec))
    ++s.descriptors;
  s.alive = !ec;
  return s;
}

bool recovered(const ProcessSample& baseline, const ProcessSample& now, bool judge_memory) {
  constexpr size_t kMiB = size_t(1) << 20;
  const size_t rss_slack = baseline.rss_bytes / 5 + 4 * kMiB;
  return now.alive && (!judge_memory || now.rss_bytes <= baseline.rss_bytes + rss_slack) &&
         now.descriptors <= baseline.descriptors + 10;
}

Settled wait_until_recovered(const std::vector<pid_t>& pids, const std::vector<ProcessSample>& baselines,
                             std::chrono::milliseconds limit, bool judge_memory) {
  const auto start = std::chrono::steady_clock::now();
  Settled s;
  for (;;) {
    s.samples.clear();
    bool done = true;
    for (size_t i = 0; i < pids.size(); ++i) {
      s.samples.push_back(sample_process(pids[i]));
      if (!s.samples.back().alive) return s;  // an exited server will not recover
      done &= recovered(baselines[i], s.samples.back(), judge_memory);
    }
    s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (done || std::chrono::steady_clock::now() - start >= limit) return s;
    std::this_thread::sleep_for(std::chrono::milliseconds(250));  // polling a reading, bounded by `limit`
  }
}

}  // namespace larql::loadtest
