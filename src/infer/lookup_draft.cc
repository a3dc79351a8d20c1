#include "infer/lookup_draft.h"

#include <algorithm>

namespace larql {

std::vector<int> lookup_draft(std::span<const int> context, size_t k, const LookupDraftOptions& options) {
  const size_t n = context.size();
  if (k == 0 || n < 2) return {};
  for (size_t len = std::min(options.max_ngram, n - 1); len >= 1; --len) {
    const auto tail = context.subspan(n - len);
    // The most recent earlier occurrence: starts from n - len - 1 down to 0.
    for (size_t start = n - len; start-- > 0;) {
      if (!std::equal(tail.begin(), tail.end(), context.begin() + long(start))) continue;
      const size_t from = start + len, count = std::min(k, n - from);
      return {context.begin() + long(from), context.begin() + long(from + count)};
    }
  }
  return {};
}

}  // namespace larql
