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
  size_t branches = 1;   // lookup_drafts: the distinct continuations wanted at most
};

// Up to k tokens that continue `context`, or none when no tail of it occurred before.
std::vector<int> lookup_draft(std::span<const int> context, size_t k, const LookupDraftOptions& options = {});

// The length of the context's longest tail (up to max_ngram tokens) that occurred before;
// 0 when its last token never did.
size_t lookup_match_length(std::span<const int> context, size_t max_ngram);

// Up to `branches` distinct continuations (k tokens at most each; none a prefix of an
// earlier one): the longest tail's occurrences first, the most recent first, then shorter
// tails'. The first is lookup_draft's. A tree of drafts verifies them in one pass.
std::vector<std::vector<int>> lookup_drafts(std::span<const int> context, size_t k, const LookupDraftOptions& options = {});

}  // namespace larql
