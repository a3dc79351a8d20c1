// Drafted continuations as one tree for a verifying pass (speculative decoding): row 0 is
// the token already chosen, each continuation's tokens hang under it, and a prefix that
// continuations share is one path, so one pass verifies them all (SequenceChunk::parents).
#pragma once

#include <cstddef>
#include <span>
#include <vector>

namespace larql {

// Drafted tokens a pass verifies at most (--draft-max's bound): a pass then holds at most
// this many rows besides the token already chosen.
inline constexpr size_t kMaxDraft = 64;

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

// Down a verified tree from row 0 (whose token is already emitted). At each row on the
// path, `choose(row, candidates, kept)` returns the token that follows the row's path,
// given the tokens of the row's children: one of them when it keeps it (`kept` its
// index), another one otherwise (`kept` −1); `emit(token)` takes the token and returns
// false when generation ends there. The walk goes on to the kept child, and stops at the
// first row that keeps none or when `emit` ends it. Returns the path walked: row 0 and
// the rows kept (a kept token that ended generation included).
template <class Choose, class Emit>
std::vector<size_t> walk_draft_tree(const DraftTree& tree, Choose&& choose, Emit&& emit) {
  std::vector<size_t> path{0};
  std::vector<int> candidates;
  for (;;) {
    const std::vector<size_t> children = tree.children(path.back());
    candidates.clear();
    for (size_t child : children) candidates.push_back(tree.tokens[child]);
    int kept = -1;
    const int token = choose(path.back(), std::span<const int>(candidates), kept);
    const bool more = emit(token);
    if (kept < 0) return path;
    path.push_back(children[size_t(kept)]);
    if (!more) return path;
  }
}

}  // namespace larql
