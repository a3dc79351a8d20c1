// Perplexity with llama.cpp's convention (its `perplexity` tool), so numbers compare:
// the token stream is cut into chunks of `ctx` tokens; the first token of each chunk is
// BOS when the model adds one; each chunk is evaluated from position 0 and only its
// second half is scored (every token there has at least ctx/2 tokens of context).
#pragma once

#include <functional>
#include <span>
#include <vector>

#include "infer/transformer.h"

namespace larql {

struct PerplexityOptions {
  size_t ctx = 512;
  size_t chunks = 0;   // 0: as many as the text holds
  size_t batch = 512;  // tokens per forward pass within a chunk
  int bos = -1;        // put at each chunk's start when ≥ 0
};

struct PerplexityEstimate {
  double perplexity = 0;
  double uncertainty = 0;  // one standard error, as llama.cpp prints it after "±"
  size_t chunks = 0;
  size_t tokens_scored = 0;
};

// `progress` gets the running estimate after each chunk. Every position's predicted
// distribution is also handed to `on_logits` when given (for comparing two models).
Result<PerplexityEstimate> perplexity(Transformer& model, std::span<const int> tokens, const PerplexityOptions& options,
                                      const std::function<void(const PerplexityEstimate&)>& progress = {},
                                      const std::function<void(std::span<const float> logits, int target)>& on_logits = {});

}  // namespace larql
