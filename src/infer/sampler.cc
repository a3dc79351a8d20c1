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

void Sampler::distribution(std::span<const float> logits, std::vector<float>& probs) const {
  probs.assign(logits.size(), 0.0f);
  if (options_.temperature <= 0.0f) {
    probs[size_t(argmax(logits))] = 1.0f;
    return;
  }
  for (size_t i = 0; i < logits.size(); ++i) probs[i] = logits[i] / options_.temperature;
  softmax(probs.data(), probs.size());
  if (options_.top_p <= 0.0f || options_.top_p >= 1.0f) return;
  std::vector<int> order(probs.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return probs[a] > probs[b]; });
  float mass = 0;
  size_t keep = 0;
  while (keep < order.size()) {
    mass += probs[order[keep++]];
    if (mass > options_.top_p) break;
  }
  for (size_t i = keep; i < order.size(); ++i) probs[order[i]] = 0.0f;
  for (size_t i = 0; i < keep; ++i) probs[order[i]] /= mass;
}

int Sampler::draw(std::span<const float> probs) {
  float total = 0;
  for (float p : probs) total += p;
  const float target = std::uniform_real_distribution<float>(0.0f, 1.0f)(rng_) * total;
  float cdf = 0;
  int last = 0;
  for (size_t i = 0; i < probs.size(); ++i) {
    if (probs[i] <= 0) continue;
    cdf += probs[i];
    last = int(i);
    if (target < cdf) return int(i);
  }
  return last;  // rounding left the target at the very top
}

std::pair<int, bool> Sampler::verify(std::span<const float> probs, int drafted) {
  const float keep = probs[size_t(drafted)];
  if (keep >= 1.0f || std::uniform_real_distribution<float>(0.0f, 1.0f)(rng_) < keep) return {drafted, true};
  thread_local std::vector<float> residual;
  residual.assign(probs.begin(), probs.end());
  residual[size_t(drafted)] = 0.0f;
  return {draw(residual), false};
}

}  // namespace larql
