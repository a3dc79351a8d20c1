// Choosing the next token: greedy (temperature 0), or temperature with optional top-k,
// top-p and min-p, from a seeded generator so runs repeat; before either, a logit bias and
// penalties on tokens already seen (vLLM's order: penalties, temperature, top-k and top-p,
// min-p).
#pragma once

#include <cstdint>
#include <map>
#include <random>
#include <span>
#include <utility>
#include <vector>

namespace larql {

struct SamplerOptions {
  float temperature = 0.0f;  // 0: greedy
  float top_p = 1.0f;        // 1: no nucleus cut
  uint64_t seed = 0;
  size_t top_k = 0;          // 0: every token
  float min_p = 0.0f;        // tokens below min_p × the most probable's probability are cut; 0: none
  // HF's repetition penalty on every token of the prompt and the generation: a positive
  // logit ÷ it, a negative one × it; 1: none.
  float repetition_penalty = 1.0f;
  // OpenAI's, on generated tokens: logit − presence (if generated at all) − frequency × times generated.
  float presence_penalty = 0.0f, frequency_penalty = 0.0f;
  std::map<int, float> logit_bias = {};  // added to those tokens' logits
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
  explicit Sampler(SamplerOptions options) : options_(std::move(options)), rng_(options_.seed) {}
  // The tokens the penalties count: the prompt's (repetition only), then each one chosen.
  void remember_prompt(std::span<const int> prompt);
  void remember(int token);
  // May change `logits` in place (bias, penalties, temperature).
  int sample(std::span<float> logits);

  // The distribution sample() draws from: softmax(shaped logits / temperature), cut by
  // top-k, the top-p nucleus and min-p, renormalised; greedy puts all the mass on the argmax.
  void distribution(std::span<const float> logits, std::vector<float>& probs) const;
  // A token drawn from probs.
  int draw(std::span<const float> probs);
  // Speculative sampling's rule for tokens drafts proposed with certainty (prompt lookup,
  // or any draft that picks deterministically), over one draft or several distinct ones (a
  // tree's branches from one node), in order: each kept with its probability under the
  // residual the ones before it left (the first: probs[drafted[0]]), else the token is a
  // draw from the last residual (probs without the drafts, renormalised). Either way the
  // token returned is distributed as probs. Returns it and the index of the draft kept, or -1.
  std::pair<int, int> verify(std::span<const float> probs, std::span<const int> drafted);
  // `chosen`'s log-probability and the `top` most likely tokens' from `logits` (unscaled),
  // leaving out those this sampler's filters (top-k, top-p, min-p) could never draw, and
  // those `allowed` (when given, a 0/1 per token) rules out.
  TokenLogprobs logprobs(std::span<const float> logits, int chosen, size_t top, std::span<const uint8_t> allowed = {}) const;

 private:
  bool shapes() const;  // a bias or a penalty applies
  void shape(std::span<float> logits) const;  // adds the bias, applies the penalties
  bool filters() const;  // top-k, top-p or min-p cut tokens

  SamplerOptions options_;
  std::mt19937_64 rng_;
  std::map<int, int> seen_;       // repetition penalty: tokens of the prompt and the generation
  std::map<int, int> generated_;  // presence and frequency: generated tokens, and how often
};

// Index of the largest value; the first one on ties (as run.c's argmax).
int argmax(std::span<const float> values);

}  // namespace larql
