#include "eval/logit_compare.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "kernels/ops.h"

namespace larql {
namespace {

std::vector<int> top_k(std::span<const float> v, size_t k) {
  std::vector<int> idx(v.size());
  std::iota(idx.begin(), idx.end(), 0);
  k = std::min(k, v.size());
  std::partial_sort(idx.begin(), idx.begin() + std::ptrdiff_t(k), idx.end(), [&](int a, int b) {
    return v[a] > v[b] || (v[a] == v[b] && a < b);
  });
  idx.resize(k);
  std::sort(idx.begin(), idx.end());
  return idx;
}

std::vector<double> log_softmax(std::span<const float> v) {
  const double log_sum = log_sum_exp(v.data(), v.size());
  std::vector<double> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = double(v[i]) - log_sum;
  return out;
}

}  // namespace

LogitComparison compare_logits(std::span<const float> reference, std::span<const float> other, size_t k) {
  LogitComparison c;
  c.bit_identical = reference.size() == other.size() && std::memcmp(reference.data(), other.data(), reference.size() * 4) == 0;
  c.top1_equal = top_k(reference, 1) == top_k(other, 1);
  c.topk_equal = top_k(reference, k) == top_k(other, k);
  for (size_t i = 0; i < reference.size(); ++i) c.max_abs_diff = std::max(c.max_abs_diff, std::fabs(reference[i] - other[i]));
  const auto lp = log_softmax(reference), lq = log_softmax(other);
  for (size_t i = 0; i < lp.size(); ++i) c.kl += std::exp(lp[i]) * (lp[i] - lq[i]);
  c.kl = std::max(0.0, c.kl);
  return c;
}

}  // namespace larql
