// Comparing two logit vectors the way `larql bench` reports them.
#pragma once

#include <span>

namespace larql {

struct LogitComparison {
  bool top1_equal = false;
  bool topk_equal = false;     // same set of the K largest
  float max_abs_diff = 0;
  double kl = 0;               // KL(p_ref ‖ p_other) of the softmax distributions, in nats
  bool bit_identical = false;
};

LogitComparison compare_logits(std::span<const float> reference, std::span<const float> other, size_t k);

}  // namespace larql
