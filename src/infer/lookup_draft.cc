#include "infer/lookup_draft.h"

#include <algorithm>

namespace larql {

namespace {

// visit(len, start) for each earlier occurrence of the context's tail: the longest tail
// first (up to max_ngram tokens), the most recent occurrence first (starts from
// n - len - 1 down to 0), until visit returns false.
template <class Visit>
void for_each_earlier_tail(std::span<const int> context, size_t max_ngram, Visit&& visit) {
  const size_t n = context.size();
  if (n < 2) return;
  for (size_t len = std::min(max_ngram, n - 1); len >= 1; --len) {
    const auto tail = context.subspan(n - len);
    for (size_t start = n - len; start-- > 0;)
      if (std::equal(tail.begin(), tail.end(), context.begin() + long(start)) && !visit(len, start)) return;
  }
}

}  // namespace

std::vector<std::vector<int>> lookup_drafts(std::span<const int> context, size_t k, const LookupDraftOptions& options) {
  std::vector<std::vector<int>> found;
  if (k == 0 || options.branches == 0) return found;
  for_each_earlier_tail(context, options.max_ngram, [&](size_t len, size_t start) {
    const size_t from = start + len, count = std::min(k, context.size() - from);
    const auto draft = context.subspan(from, count);
    const bool known = std::any_of(found.begin(), found.end(), [&](const std::vector<int>& earlier) {
      return earlier.size() >= count && std::equal(draft.begin(), draft.end(), earlier.begin());
    });
    if (!known) found.emplace_back(draft.begin(), draft.end());
    return found.size() < options.branches;
  });
  return found;
}

size_t lookup_match_length(std::span<const int> context, size_t max_ngram) {
  size_t matched = 0;
  for_each_earlier_tail(context, max_ngram, [&](size_t len, size_t) {
    matched = len;
    return false;
  });
  return matched;
}

std::vector<int> lookup_draft(std::span<const int> context, size_t k, const LookupDraftOptions& options) {
  auto drafts = lookup_drafts(context, k, {options.max_ngram, 1});
  return drafts.empty() ? std::vector<int>{} : std::move(drafts.front());
}

}  // namespace larql
