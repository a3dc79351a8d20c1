// Drafting from a small model for speculative decoding (`--draft MODEL`): a model with the
// target's vocabulary, run locally with its own KV cache (its FFN too, wherever the
// target's is), proposes the k tokens its greedy decoding would write next. Its cache
// follows the context: the positions it holds that agree with the context are kept, the
// rest are computed again (a rejected draft's are overwritten, as the target's are).
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "base/errors.h"
#include "infer/local_ffn.h"
#include "infer/transformer.h"
#include "kernels/thread_pool.h"
#include "model/model.h"

namespace larql {

class ModelDraft {
 public:
  // Refused, naming both, when the draft's vocabulary is not the target's size.
  static Result<std::unique_ptr<ModelDraft>> create(const Model& draft, const ModelConfig& target, ThreadPool& pool);

  // Up to k tokens continuing `context` (none past the draft's own context length).
  std::vector<int> propose(std::span<const int> context, size_t k);

 private:
  ModelDraft(const Model& draft, ThreadPool& pool) : ffn_(draft, pool), transformer_(draft, ffn_, pool) {}
  LocalFfn ffn_;
  Transformer transformer_;
  std::vector<int> cached_;  // the tokens whose keys and values the cache holds, from position 0
  std::vector<float> logits_;
};

}  // namespace larql
