// Choosing the next token: greedy (temperature 0), or temperature with optional top-p,
// from a seeded generator so runs repeat.
#pragma once

#include <cstdint>
#include <random>
#include <span>

namespace larql {

struct SamplerOptions {
  float temperature = 0.0f;  // 0: greedy
  float top_p = 1.0f;        // 1: no nucleus cut
  uint64_t seed = 0;
};

class Sampler {
 public:
  explicit Sampler(SamplerOptions options) : options_(options), rng_(options.seed) {}
  // May scale `logits` in place.
  int sample(std::span<float> logits);

 private:
  SamplerOptions options_;
  std::mt19937_64 rng_;
};

// Index of the largest value; the first one on ties (as run.c's argmax).
int argmax(std::span<const float> values);

}  // namespace larql
