#include "infer/moe_routing.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "kernels/ops.h"

namespace larql {

Status route(std::span<const float> logits, const MoeSpec& moe, std::span<ExpertChoice> out) {
  const size_t E = logits.size(), K = moe.experts_used;
  if (K == 0 || K > E || out.size() != K)
    return make_error(ErrorCode::internal, "route: top-" + std::to_string(K) + " of " + std::to_string(E) + " experts");
  for (size_t e = 0; e < E; ++e)
    if (!std::isfinite(logits[e]))
      return make_error(ErrorCode::non_finite_output, "the router's logit for expert " + std::to_string(e) + " is not finite");
  thread_local std::vector<float> probs;
  thread_local std::vector<uint32_t> order;
  probs.assign(logits.begin(), logits.end());
  // top_k_softmax picks from the logits, the others from the softmax over all experts.
  const bool chosen_softmax = moe.weights == RouterWeights::top_k_softmax;
  if (!chosen_softmax) softmax(probs.data(), E);
  order.resize(E);
  std::iota(order.begin(), order.end(), 0u);
  std::partial_sort(order.begin(), order.begin() + K, order.end(),
                    [&](uint32_t a, uint32_t b) { return probs[a] > probs[b] || (probs[a] == probs[b] && a < b); });
  std::sort(order.begin(), order.begin() + K);
  if (chosen_softmax) {
    thread_local std::vector<float> chosen;
    chosen.resize(K);
    for (size_t j = 0; j < K; ++j) chosen[j] = probs[order[j]];
    softmax(chosen.data(), K);
    for (size_t j = 0; j < K; ++j) out[j] = {order[j], chosen[j]};
    return Ok{};
  }
  float sum = 0;
  for (size_t j = 0; j < K; ++j) sum += probs[order[j]];
  const bool renormalise = moe.weights == RouterWeights::softmax_top_k_renormalised;
  for (size_t j = 0; j < K; ++j) out[j] = {order[j], renormalise ? probs[order[j]] / sum : probs[order[j]]};
  return Ok{};
}

}  // namespace larql
