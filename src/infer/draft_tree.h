// Drafted continuations as one tree for a verifying pass (speculative decoding): row 0 is
// the token already chosen, each continuation's tokens hang under it, and a prefix that
// continuations share is one path, so one pass verifies them all (SequenceChunk::parents).
#pragma once

#include <cstddef>
#include <span>
#include <vector>

namespace larql {

struct DraftTree {
  std::vector<int> tokens;   // per row
  std::vector<int> parents;  // per row: an earlier row; -1 for row 0

  // `first`, then each draft's tokens as a path under it (in the drafts' order), at most
  // `max_rows` rows (≥ 1): a draft that does not fit is cut.
  static DraftTree build(int first, std::span<const std::vector<int>> drafts, size_t max_rows);
  // The rows whose parent is `row`, in row order (their tokens differ).
  std::vector<size_t> children(size_t row) const;
  size_t drafted() const { return tokens.size() - 1; }
};

}  // namespace larql
