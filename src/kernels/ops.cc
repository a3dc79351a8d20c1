#include "kernels/ops.h"

#include <algorithm>
#include <cmath>

#include "kernels/exp.h"

namespace larql {

void rmsnorm(float* out, const float* x, const Matrix& weight, size_t n, float eps, float weight_offset) {
  float ss = 0;
  for (size_t i = 0; i < n; ++i) ss += x[i] * x[i];
  ss = ss / static_cast<float>(n) + eps;
  const float inv = 1.0f / std::sqrt(ss);
  if (!weight.data) {  // a norm without weight (Gemma 4's v_norm)
    for (size_t i = 0; i < n; ++i) out[i] = inv * x[i];
    return;
  }
  for (size_t i = 0; i < n; ++i) out[i] = (weight_offset + load_as_f32(weight.dtype, weight.data, i)) * (inv * x[i]);
}

void softcap(float* x, size_t n, float cap) {
  for (size_t i = 0; i < n; ++i) x[i] = cap * std::tanh(x[i] / cap);
}

void softmax(float* x, size_t n) {
  const float max = *std::max_element(x, x + n);
  for (size_t i = 0; i < n; ++i) x[i] -= max;
  exp_in_place(x, n);
  float sum = 0;
  for (size_t i = 0; i < n; ++i) sum += x[i];
  for (size_t i = 0; i < n; ++i) x[i] /= sum;
}

void gated_activation(float* gate, const float* up, size_t n, Activation act) {
  if (act == Activation::silu) {  // gate / (1 + e^-gate) · up, the exponentials a block at a time
    constexpr size_t kBlock = 256;
    float e[kBlock];
    for (size_t i0 = 0; i0 < n; i0 += kBlock) {
      const size_t m = std::min(kBlock, n - i0);
      for (size_t i = 0; i < m; ++i) e[i] = -gate[i0 + i];
      exp_in_place(e, m);
      for (size_t i = 0; i < m; ++i) gate[i0 + i] = gate[i0 + i] / (1.0f + e[i]) * up[i0 + i];
    }
    return;
  }
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  for (size_t i = 0; i < n; ++i) {
    const float g = gate[i];
    gate[i] = 0.5f * g * (1.0f + std::tanh(kSqrt2OverPi * (g + 0.044715f * g * g * g))) * up[i];
  }
}

}  // namespace larql
