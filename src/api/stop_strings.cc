#include "api/stop_strings.h"

#include <algorithm>

namespace larql {

StopStrings::StopStrings(std::vector<std::string> stops) : stops_(std::move(stops)) {
  std::erase_if(stops_, [](const std::string& s) { return s.empty(); });
}

std::string StopStrings::push(const std::string& piece) {
  if (stopped_) return {};
  held_ += piece;
  // The earliest stop string in the text held.
  size_t at = std::string::npos;
  for (const auto& s : stops_) at = std::min(at, held_.find(s));
  if (at != std::string::npos) {
    stopped_ = true;
    std::string out = held_.substr(0, at);
    held_.clear();
    return out;
  }
  // Keep the longest tail that is the beginning of some stop string.
  size_t keep = 0;
  for (const auto& s : stops_)
    for (size_t n = std::min(s.size() - 1, held_.size()); n > keep; --n)
      if (held_.compare(held_.size() - n, n, s, 0, n) == 0) {
        keep = n;
        break;
      }
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

std::string StopStrings::finish() {
  if (stopped_) return {};
  std::string out;
  out.swap(held_);
  return out;
}

}  // namespace larql
