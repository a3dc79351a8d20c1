#include "kernels/ops.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

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

namespace {

// The value std::max_element finds, in sixteen lanes: the largest value that is not NaN,
// or NaN when x[0] is one. Zeros of either sign may stand for each other, which changes
// no x - max.
float row_max(const float* x, size_t n) {
  if (std::isnan(x[0])) return x[0];
  float lanes[16];
  std::fill(std::begin(lanes), std::end(lanes), -std::numeric_limits<float>::infinity());
  size_t i = 0;
#if defined(__x86_64__)  // GCC leaves the loop below scalar; SSE is every x86-64's
  __m128 m[4] = {_mm_loadu_ps(lanes), _mm_loadu_ps(lanes), _mm_loadu_ps(lanes), _mm_loadu_ps(lanes)};
  for (; i + 16 <= n; i += 16)
    for (int l = 0; l < 4; ++l) m[l] = _mm_max_ps(_mm_loadu_ps(x + i + 4 * l), m[l]);  // a NaN in x loses
  for (int l = 0; l < 4; ++l) _mm_storeu_ps(lanes + 4 * l, m[l]);
#endif
  for (; i + 16 <= n; i += 16)
    for (size_t l = 0; l < 16; ++l) lanes[l] = lanes[l] < x[i + l] ? x[i + l] : lanes[l];
  for (; i < n; ++i) lanes[0] = lanes[0] < x[i] ? x[i] : lanes[0];
  float max = lanes[0];
  for (float l : lanes) max = max < l ? l : max;
  return max;
}

}  // namespace

void softmax(float* x, size_t n) { softmax_rows(x, 1, n, n); }

void softmax_rows(float* x, size_t rows, size_t stride, size_t n) {
  if (n == 0) return;
  for (size_t r = 0; r < rows; ++r) {
    float* row = x + r * stride;
    const float max = row_max(row, n);
    for (size_t i = 0; i < n; ++i) row[i] -= max;
    exp_in_place(row, n);
  }
  for (size_t r0 = 0; r0 < rows; r0 += 4) {
    float sums[4] = {};
    const size_t group = std::min<size_t>(4, rows - r0);
    if (group == 4) {  // four independent chains, each in increasing i
      const float *a = x + r0 * stride, *b = a + stride, *c = b + stride, *d = c + stride;
      for (size_t i = 0; i < n; ++i) sums[0] += a[i], sums[1] += b[i], sums[2] += c[i], sums[3] += d[i];
    } else {
      for (size_t r = 0; r < group; ++r)
        for (size_t i = 0; i < n; ++i) sums[r] += x[(r0 + r) * stride + i];
    }
    for (size_t r = 0; r < group; ++r) {
      float* row = x + (r0 + r) * stride;
      for (size_t i = 0; i < n; ++i) row[i] /= sums[r];
    }
  }
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
