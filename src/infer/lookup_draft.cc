#include "infer/lookup_draft.h"

#include <algorithm>

namespace larql {

std::vector<std::vector<int>> lookup_drafts(std::span<const int> context, size_t k, const LookupDraftOptions& options) {
  std::vector<std::vector<int>> found;
  const size_t n = context.size();
  if (k == 0 || n < 2 || options.branches == 0) return found;
  for (size_t len = std::min(options.max_ngram, n - 1); len >= 1; --len) {
    const auto tail = context.subspan(n - len);
    // The most recent earlier occurrence first: starts from n - len - 1 down to 0.
    for (size_t start = n - len; start-- > 0;) {
      if (!std::equal(tail.begin(), tail.end(), context.begin() + long(start))) continue;
      const size_t from = start + len, count = std::min(k, n - from);
      const auto draft = context.subspan(from, count);
      const bool known = std::any_of(found.begin(), found.end(), [&](const std::vector<int>& earlier) {
        return earlier.size() >= count && std::equal(draft.begin(), draft.end(), earlier.begin());
      });
      if (known) continue;
      found.emplace_back(draft.begin(), draft.end());
      if (found.size() == options.branches) return found;
    }
  }
  return found;
}

size_t lookup_match_length(std::span<const int> context, size_t max_ngram) {
  const size_t n = context.size();
  if (n < 2) return 0;
  for (size_t len = std::min(max_ngram, n - 1); len >= 1; --len) {
    const auto tail = context.subspan(n - len);
    for (size_t start = n - len; start-- > 0;)
      if (std::equal(tail.begin(), tail.end(), context.begin() + long(start))) return len;
  }
  return 0;
}

std::vector<int> lookup_draft(std::span<const int> context, size_t k, const LookupDraftOptions& options) {
  auto drafts = lookup_drafts(context, k, {options.max_ngram, 1});
  return drafts.empty() ? std::vector<int>{} : std::move(drafts.front());
}

}  // namespace larql
