#include "eval/perplexity.h"

#include <algorithm>
#include <cmath>

#include "kernels/ops.h"

namespace larql {
namespace {

// -log softmax(logits)[target], in double.
double negative_log_likelihood(std::span<const float> logits, int target) {
  return log_sum_exp(logits.data(), logits.size()) - double(logits[size_t(target)]);
}

}  // namespace

Result<PerplexityEstimate> perplexity(Transformer& model, std::span<const int> tokens, const PerplexityOptions& o,
                                      const std::function<void(const PerplexityEstimate&)>& progress,
                                      const std::function<void(std::span<const float>, int)>& on_logits) {
  const size_t vocab = model.config().vocab;
  if (o.ctx < 4 || o.ctx > model.config().context)
    return make_error(ErrorCode::invalid_argument, "--ctx must be from 4 to the model's context (" +
                                                       std::to_string(model.config().context) + ")");
  size_t chunks = tokens.size() / o.ctx;
  if (o.chunks) chunks = std::min(chunks, o.chunks);
  if (chunks == 0)
    return make_error(ErrorCode::invalid_argument, "the text has " + std::to_string(tokens.size()) +
                                                       " tokens, fewer than one chunk of " + std::to_string(o.ctx));
  const size_t first = o.ctx / 2;
  double nll = 0, nll2 = 0;
  PerplexityEstimate e;
  std::vector<int> chunk(o.ctx);
  std::vector<float> logits;
  for (size_t c = 0; c < chunks; ++c) {
    std::copy_n(tokens.begin() + std::ptrdiff_t(c * o.ctx), o.ctx, chunk.begin());
    if (o.bos >= 0) chunk[0] = o.bos;
    for (size_t start = 0; start < o.ctx; start += o.batch) {
      const size_t n = std::min(o.batch, o.ctx - start);
      // Logits from position `first` on (the last position predicts nothing in the chunk).
      const size_t from = std::max(start, first), last = start + n;
      const size_t wanted_from = from < last ? from - start : n - 1;
      if (auto s = model.forward_logits({chunk.data() + start, n}, start, wanted_from, logits); !s) return s.error();
      for (size_t pos = start + wanted_from; pos < last; ++pos) {
        if (pos < first || pos + 1 >= o.ctx) continue;
        const std::span<const float> row(logits.data() + (pos - start - wanted_from) * vocab, vocab);
        const int target = chunk[pos + 1];
        const double v = negative_log_likelihood(row, target);
        nll += v;
        nll2 += v * v;
        ++e.tokens_scored;
        if (on_logits) on_logits(row, target);
      }
    }
    e.chunks = c + 1;
    const double mean = nll / double(e.tokens_scored);
    e.perplexity = std::exp(mean);
    const double variance = nll2 / double(e.tokens_scored) - mean * mean;
    e.uncertainty = e.tokens_scored > 1 && variance > 0 ? std::sqrt(variance / double(e.tokens_scored - 1)) * e.perplexity : 0;
    if (progress) progress(e);
  }
  return e;
}

}  // namespace larql
