#include "infer/sampler.h"

#include <algorithm>
#include <numeric>
#include <vector>

#include "kernels/ops.h"

namespace larql {

int argmax(std::span<const float> values) {
  int best = 0;
  for (size_t i = 1; i < values.size(); ++i)
    if (values[i] > values[best]) best = int(i);
  return best;
}

int Sampler::sample(std::span<float> logits) {
  if (options_.temperature <= 0.0f) return argmax(logits);
  for (float& l : logits) l /= options_.temperature;
  softmax(logits.data(), logits.size());
  const float coin = std::uniform_real_distribution<float>(0.0f, 1.0f)(rng_);
  if (options_.top_p <= 0.0f || options_.top_p >= 1.0f) {
    float cdf = 0;
    for (size_t i = 0; i < logits.size(); ++i) {
      cdf += logits[i];
      if (coin < cdf) return int(i);
    }
    return int(logits.size() - 1);
  }
  // Nucleus: the most probable tokens whose mass first exceeds top_p, renormalised.
  std::vector<int> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return logits[a] > logits[b]; });
  float mass = 0;
  size_t keep = 0;
  while (keep < order.size()) {
    mass += logits[order[keep++]];
    if (mass > options_.top_p) break;
  }
  const float target = coin * mass;
  float cdf = 0;
  for (size_t i = 0; i < keep; ++i) {
    cdf += logits[order[i]];
    if (target < cdf) return order[i];
  }
  return order[keep - 1];
}

}  // namespace larql
