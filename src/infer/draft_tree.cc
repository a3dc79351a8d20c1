#include "infer/draft_tree.h"

namespace larql {

DraftTree DraftTree::build(int first, std::span<const std::vector<int>> drafts, size_t max_rows) {
  DraftTree tree{{first}, {-1}};
  for (const std::vector<int>& draft : drafts) {
    size_t row = 0;
    for (int token : draft) {
      size_t next = 0;  // the child of `row` with this token, if there is one
      for (size_t r = row + 1; r < tree.tokens.size() && next == 0; ++r)
        if (tree.parents[r] == int(row) && tree.tokens[r] == token) next = r;
      if (next == 0) {
        if (tree.tokens.size() == max_rows) break;
        next = tree.tokens.size();
        tree.tokens.push_back(token);
        tree.parents.push_back(int(row));
      }
      row = next;
    }
  }
  return tree;
}

std::vector<size_t> DraftTree::children(size_t row) const {
  std::vector<size_t> out;
  for (size_t r = row + 1; r < tokens.size(); ++r)
    if (parents[r] == int(row)) out.push_back(r);
  return out;
}

}  // namespace larql
