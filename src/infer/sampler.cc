#include "infer/sampler.h"

#include <algorithm>
#include <cmath>
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

namespace {

// The nucleus of probabilities p: token ids by decreasing probability (ties in id order),
// the first `keep` of them the most probable whose mass first exceeds top_p, and that mass.
struct Nucleus {
  std::vector<int> order;
  size_t keep = 0;
  float mass = 0;
};
Nucleus nucleus(std::span<const float> p, float top_p) {
  Nucleus n;
  n.order.resize(p.size());
  std::iota(n.order.begin(), n.order.end(), 0);
  std::stable_sort(n.order.begin(), n.order.end(), [&](int a, int b) { return p[a] > p[b]; });
  while (n.keep < n.order.size()) {
    n.mass += p[n.order[n.keep++]];
    if (n.mass > top_p) break;
  }
  return n;
}

}  // namespace

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
  const Nucleus n = nucleus(logits, options_.top_p);
  const float target = coin * n.mass;
  float cdf = 0;
  for (size_t i = 0; i < n.keep; ++i) {
    cdf += logits[n.order[i]];
    if (target < cdf) return n.order[i];
  }
  return n.order[n.keep - 1];
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
  const Nucleus n = nucleus(probs, options_.top_p);
  for (size_t i = n.keep; i < n.order.size(); ++i) probs[n.order[i]] = 0.0f;
  for (size_t i = 0; i < n.keep; ++i) probs[n.order[i]] /= n.mass;
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

TokenLogprobs Sampler::logprobs(std::span<const float> logits, int chosen, size_t top) const {
  const float max = logits[size_t(argmax(logits))];
  double sum = 0;
  for (float l : logits) sum += std::exp(double(l) - max);
  const double log_z = double(max) + std::log(sum);
  TokenLogprobs out{chosen, float(double(logits[size_t(chosen)]) - log_z), {}};
  if (top == 0) return out;
  std::vector<float> kept;  // the filters' distribution, where they remove tokens
  const bool filtered = options_.temperature > 0.0f && options_.top_p > 0.0f && options_.top_p < 1.0f;
  if (filtered) distribution(logits, kept);
  std::vector<int> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  const size_t n = std::min(top, order.size());
  std::partial_sort(order.begin(), order.begin() + std::ptrdiff_t(n), order.end(),
                    [&](int a, int b) { return logits[size_t(a)] > logits[size_t(b)] || (logits[size_t(a)] == logits[size_t(b)] && a < b); });
  for (size_t i = 0; i < n; ++i)
    if (!filtered || kept[size_t(order[i])] > 0.0f) out.top.emplace_back(order[i], float(double(logits[size_t(order[i])]) - log_z));
  return out;
}

}  // namespace larql
