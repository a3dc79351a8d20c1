// Choosing the next token: greedy (temperature 0), or temperature with optional top-p,
// from a seeded generator so runs repeat.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <utility>
#include <vector>

namespace larql {

struct SamplerOptions {
  float temperature = 0.0f;  // 0: greedy
  float top_p = 1.0f;        // 1: no nucleus cut
  uint64_t seed = 0;
};

// A generated token's log-probabilities as evaluation harnesses read them: the
// log-softmax of the model's raw logits (before temperature and filters), of the chosen
// token and of the `top` most likely ones (ties in id order).
struct TokenLogprobs {
  int token = 0;
  float logprob = 0;
  std::vector<std::pair<int, float>> top;
};

class Sampler {
 public:
  explicit Sampler(SamplerOptions options) : options_(options), rng_(options.seed) {}
  // May scale `logits` in place.
  int sample(std::span<float> logits);

  // The distribution sample() draws from: softmax(logits / temperature), cut to the top-p
  // nucleus and renormalised; greedy puts all the mass on the argmax.
  void distribution(std::span<const float> logits, std::vector<float>& probs) const;
  // A token drawn from probs.
  int draw(std::span<const float> probs);
  // Speculative sampling's rule for a token a draft proposed with certainty (prompt lookup,
  // or any draft that picks deterministically): kept with probability probs[drafted], else
  // replaced by a draw from the residual, probs without the draft, renormalised. Either
  // way the token returned is distributed as probs (the second: whether it is the draft).
  std::pair<int, bool> verify(std::span<const float> probs, int drafted);
  // `chosen`'s log-probability and the `top` most likely tokens' from `logits` (unscaled),
  // leaving out those this sampler's filters (top-p) could never draw.
  TokenLogprobs logprobs(std::span<const float> logits, int chosen, size_t top) const;

 private:
  SamplerOptions options_;
  std::mt19937_64 rng_;
};

// Index of the largest value; the first one on ties (as run.c's argmax).
int argmax(std::span<const float> values);

}  // namespace larql
