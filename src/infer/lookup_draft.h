// Prompt-lookup drafting for speculative decoding: the tokens that followed the most recent
// earlier occurrence of the context's tail (its longest suffix of up to max_ngram tokens
// that occurred before) are proposed as the next ones. No second model: text that repeats
// its prompt or itself (quotes, code, lists, a model's loops) is guessed for free.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

namespace larql {

struct LookupDraftOptions {
  size_t max_ngram = 3;  // the longest tail looked for
};

// Up to k tokens that continue `context`, or none when no tail of it occurred before.
std::vector<int> lookup_draft(std::span<const int> context, size_t k, const LookupDraftOptions& options = {});

}  // namespace larql
