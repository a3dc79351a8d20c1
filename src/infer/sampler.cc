#include "infer/sampler.h"

#include <algorithm>
#include <limits>
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

void Sampler::remember_prompt(std::span<const int> prompt) {
  if (options_.repetition_penalty != 1.0f)
    for (int t : prompt) ++seen_[t];
}

void Sampler::remember(int token) {
  if (options_.repetition_penalty != 1.0f) ++seen_[token];
  if (options_.presence_penalty != 0.0f || options_.frequency_penalty != 0.0f) ++generated_[token];
}

bool Sampler::shapes() const {
  return !options_.logit_bias.empty() || !seen_.empty() || !generated_.empty();
}

void Sampler::shape(std::span<float> logits) const {
  for (const auto& [t, bias] : options_.logit_bias)
    if (size_t(t) < logits.size()) logits[size_t(t)] += bias;
  for (const auto& [t, n] : seen_) {
    float& l = logits[size_t(t)];
    l = l > 0 ? l / options_.repetition_penalty : l * options_.repetition_penalty;
  }
  for (const auto& [t, n] : generated_) logits[size_t(t)] -= options_.presence_penalty + options_.frequency_penalty * float(n);
}

bool Sampler::filters() const {
  return options_.temperature > 0.0f &&
         (options_.top_k > 0 || (options_.top_p > 0.0f && options_.top_p < 1.0f) || options_.min_p > 0.0f);
}

int Sampler::sample(std::span<float> logits) {
  if (shapes()) shape(logits);
  if (options_.temperature <= 0.0f) return argmax(logits);
  if (filters()) {
    thread_local std::vector<float> probs;
    distribution(logits, probs);
    return draw(probs);
  }
  for (float& l : logits) l /= options_.temperature;
  softmax(logits.data(), logits.size());
  const float coin = std::uniform_real_distribution<float>(0.0f, 1.0f)(rng_);
  float cdf = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    cdf += logits[i];
    if (coin < cdf) return int(i);
  }
  return int(logits.size() - 1);
}

void Sampler::distribution(std::span<const float> logits, std::vector<float>& probs) const {
  probs.assign(logits.begin(), logits.end());
  if (shapes()) shape(probs);
  if (options_.temperature <= 0.0f) {
    const size_t best = size_t(argmax(probs));
    probs.assign(logits.size(), 0.0f);
    probs[best] = 1.0f;
    return;
  }
  for (float& p : probs) p /= options_.temperature;
  softmax(probs.data(), probs.size());
  if (!filters()) return;
  // top-k, then the top-p nucleus of what is left (renormalised), then min-p.
  std::vector<int> order(probs.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return probs[size_t(a)] > probs[size_t(b)]; });
  size_t keep = options_.top_k > 0 ? std::min(options_.top_k, order.size()) : order.size();
  float mass = 0;
  for (size_t i = 0; i < keep; ++i) mass += probs[size_t(order[i])];
  if (options_.top_p > 0.0f && options_.top_p < 1.0f) {
    float nucleus = 0;
    size_t n = 0;
    while (n < keep) {
      nucleus += probs[size_t(order[n++])] / mass;
      if (nucleus > options_.top_p) break;
    }
    keep = n;
  }
  const float floor = options_.min_p * probs[size_t(order[0])];
  while (keep > 1 && probs[size_t(order[keep - 1])] < floor) --keep;
  mass = 0;
  for (size_t i = 0; i < keep; ++i) mass += probs[size_t(order[i])];
  for (size_t i = keep; i < order.size(); ++i) probs[size_t(order[i])] = 0.0f;
  for (size_t i = 0; i < keep; ++i) probs[size_t(order[i])] /= mass;
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

std::pair<int, int> Sampler::verify(std::span<const float> probs, std::span<const int> drafted) {
  thread_local std::vector<float> residual;
  residual.assign(probs.begin(), probs.end());
  float mass = 1.0f;  // what the residual holds (probs sum to one)
  for (size_t i = 0; i < drafted.size(); ++i) {
    const float keep = residual[size_t(drafted[i])] / mass;
    if (keep >= 1.0f || std::uniform_real_distribution<float>(0.0f, 1.0f)(rng_) < keep) return {drafted[i], int(i)};
    residual[size_t(drafted[i])] = 0.0f;
    mass = 0;
    for (float p : residual) mass += p;
    if (mass <= 0) return {drafted[i], int(i)};  // rounding refused a draft that held all the mass
  }
  return {draw(residual), -1};
}

TokenLogprobs Sampler::logprobs(std::span<const float> logits, int chosen, size_t top, std::span<const uint8_t> allowed) const {
  const double log_z = log_sum_exp(logits.data(), logits.size());
  TokenLogprobs out{chosen, float(double(logits[size_t(chosen)]) - log_z), {}};
  if (top == 0) return out;
  std::vector<float> kept;  // the filters' distribution, where they remove tokens
  const bool filtered = filters();
  if (filtered && !allowed.empty()) {  // the filters cut the distribution the mask left
    std::vector<float> masked(logits.begin(), logits.end());
    for (size_t i = 0; i < masked.size(); ++i)
      if (i >= allowed.size() || !allowed[i]) masked[i] = -std::numeric_limits<float>::infinity();
    distribution(masked, kept);
  } else if (filtered) {
    distribution(logits, kept);
  }
  // The `top` largest in one pass, kept sorted (an id ties with an earlier one: the earlier first).
  std::vector<std::pair<float, int>> best;
  best.reserve(top + 1);
  for (size_t i = 0; i < logits.size(); ++i) {
    if (best.size() == top && logits[i] <= best.back().first) continue;
    if (!allowed.empty() && (i >= allowed.size() || !allowed[i])) continue;
    auto at = std::find_if(best.begin(), best.end(), [&](const auto& b) { return logits[i] > b.first; });
    best.insert(at, {logits[i], int(i)});
    if (best.size() > top) best.pop_back();
  }
  for (const auto& [logit, id] : best)
    if (!filtered || kept[size_t(id)] > 0.0f) out.top.emplace_back(id, float(double(logit) - log_z));
  return out;
}

}  // namespace larql
