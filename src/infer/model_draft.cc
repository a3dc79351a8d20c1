#include "infer/model_draft.h"

#include <algorithm>

#include "infer/sampler.h"

namespace larql {

Result<std::unique_ptr<ModelDraft>> ModelDraft::create(const Model& draft, const ModelConfig& target, ThreadPool& pool) {
  if (draft.config.vocab != target.vocab)
    return make_error(ErrorCode::invalid_argument, "--draft: the draft model's vocabulary has " + std::to_string(draft.config.vocab) +
                                                       " tokens, the target's " + std::to_string(target.vocab) +
                                                       "; a draft must share the target's tokenizer");
  return std::unique_ptr<ModelDraft>(new ModelDraft(draft, pool));
}

std::vector<int> ModelDraft::propose(std::span<const int> context, size_t k) {
  const size_t limit = transformer_.config().context;
  if (context.empty() || k == 0 || context.size() + k > limit) return {};
  // Keep what the cache holds of the context, but always run its last token (its logits).
  size_t same = 0;
  while (same < cached_.size() && same + 1 < context.size() && cached_[same] == context[same]) ++same;
  std::vector<int> drafts;
  if (!transformer_.forward(context.subspan(same), same, logits_)) {
    cached_.resize(same);  // what it held before the failed pass is still good
    return {};
  }
  cached_.assign(context.begin(), context.end());
  for (;;) {
    drafts.push_back(argmax(logits_));
    if (drafts.size() == k) break;
    const int token = drafts.back();
    if (!transformer_.forward({&token, 1}, cached_.size(), logits_)) break;
    cached_.push_back(token);
  }
  return drafts;
}

}  // namespace larql
