#include "kernels/ops.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>

#include "base/simd_avx512.h"
#endif

#include "kernels/exp.h"
#include "kernels/matvec.h"

namespace larql {
namespace {

// sums[r] = term(row r's x[0]) + term(x[1]) + ... in increasing i, for up to four rows
// (row r at x + r · stride): one sum is a chain of dependent adds, so four rows' chains run
// side by side, each in its own order.
template <class Term>
void sums_side_by_side(const float* x, size_t rows, size_t stride, size_t n, float (&sums)[4], Term term) {
  std::fill(std::begin(sums), std::end(sums), 0.0f);
  if (rows == 4) {
    const float *a = x, *b = a + stride, *c = b + stride, *d = c + stride;
    for (size_t i = 0; i < n; ++i) sums[0] += term(a[i]), sums[1] += term(b[i]), sums[2] += term(c[i]), sums[3] += term(d[i]);
  } else {
    for (size_t r = 0; r < rows; ++r)
      for (size_t i = 0; i < n; ++i) sums[r] += term(x[r * stride + i]);
  }
}

}  // namespace

void rmsnorm(float* out, const float* x, const Matrix& weight, size_t n, float eps, float weight_offset) {
  rmsnorm_rows(out, x, 1, weight, n, eps, weight_offset);
}

void rmsnorm_rows(float* out, const float* x, size_t rows, const Matrix& weight, size_t n, float eps, float weight_offset) {
  // The weight as floats, so that the loop over each row's values has no switch on its
  // type (and vectorises): f32 weights (GGUF's norms) as stored, others converted once per
  // call.
  thread_local std::vector<float> converted;
  const float* w = nullptr;
  if (weight.data && weight.dtype == DType::f32) {
    w = static_cast<const float*>(weight.data);
  } else if (weight.data) {
    converted.resize(n);
    for (size_t i = 0; i < n; ++i) converted[i] = load_as_f32(weight.dtype, weight.data, i);
    w = converted.data();
  }
  for (size_t r0 = 0; r0 < rows; r0 += 4) {
    const size_t group = std::min<size_t>(4, rows - r0);
    float squares[4];
    sums_side_by_side(x + r0 * n, group, n, n, squares, [](float v) { return v * v; });
    for (size_t r = 0; r < group; ++r) {
      const float inv = 1.0f / std::sqrt(squares[r] / static_cast<float>(n) + eps);
      const float* in = x + (r0 + r) * n;
      float* o = out + (r0 + r) * n;
      if (!w) {  // a norm without weight (Gemma 4's v_norm)
        for (size_t i = 0; i < n; ++i) o[i] = inv * in[i];
        continue;
      }
      for (size_t i = 0; i < n; ++i) o[i] = (weight_offset + w[i]) * (inv * in[i]);
    }
  }
}

void add_bias_rows(float* rows, size_t n, const Matrix& bias) {
  if (!bias.data) return;
  for (size_t t = 0; t < n; ++t)
    for (size_t i = 0; i < bias.cols; ++i) rows[t * bias.cols + i] += load_as_f32(bias.dtype, bias.data, i);
}

void softcap(float* x, size_t n, float cap) {
  // cap · tanh(x / cap) with tanh|y| = (1 − e^(−2|y|)) / (1 + e^(−2|y|)): the exponentials are
  // exp.h's, the same bits on every CPU (glibc's tanhf picks its code by CPU), a block at a time.
  constexpr size_t kBlock = 256;
  float e[kBlock];
  for (size_t i0 = 0; i0 < n; i0 += kBlock) {
    const size_t m = std::min(kBlock, n - i0);
    for (size_t i = 0; i < m; ++i) e[i] = -2.0f * std::fabs(x[i0 + i] / cap);
    exp_in_place(e, m);
    for (size_t i = 0; i < m; ++i) x[i0 + i] = cap * std::copysign((1.0f - e[i]) / (1.0f + e[i]), x[i0 + i]);
  }
}

namespace {

// The value std::max_element finds, in sixteen lanes: the largest value that is not NaN,
// or NaN when x[0] is one. Zeros of either sign may stand for each other, which changes
// no x - max.
float row_max_scalar(const float* x, size_t n) {
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

void divide_scalar(float* x, size_t n, float by) {
  for (size_t i = 0; i < n; ++i) x[i] /= by;
}

#if defined(__x86_64__)
// The same maximum (a different tree over the lanes finds the same largest value).
LARQL_AVX512_TARGET("avx512f") float row_max_avx512(const float* x, size_t n) {
  if (std::isnan(x[0])) return x[0];
  const __m512 lowest = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  __m512 m = lowest;
  size_t i = 0;
  for (; i + 16 <= n; i += 16) m = _mm512_max_ps(_mm512_loadu_ps(x + i), m);  // a NaN in x loses
  float lanes[16];
  _mm512_storeu_ps(lanes, m);
  float max = lanes[0];
  for (float l : lanes) max = max < l ? l : max;
  for (; i < n; ++i) max = max < x[i] ? x[i] : max;
  return max;
}

// Division is correctly rounded on every ISA: the same bits, sixteen at a time.
LARQL_AVX512_TARGET("avx512f") void divide_avx512(float* x, size_t n, float by) {
  const __m512 d = _mm512_set1_ps(by);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(x + i, _mm512_div_ps(_mm512_loadu_ps(x + i), d));
  if (i < n) {
    const __mmask16 present = __mmask16((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(x + i, present, _mm512_div_ps(_mm512_maskz_loadu_ps(present, x + i), d));
  }
}
#endif

bool use_avx512() {
  static const bool avx512 = best_matmul_isa() >= MatmulIsa::avx512;
  return avx512;
}

float row_max(const float* x, size_t n) {
#if defined(__x86_64__)
  if (use_avx512()) return row_max_avx512(x, n);
#endif
  return row_max_scalar(x, n);
}

void divide(float* x, size_t n, float by) {
#if defined(__x86_64__)
  if (use_avx512()) return divide_avx512(x, n, by);
#endif
  divide_scalar(x, n, by);
}

}  // namespace

void softmax(float* x, size_t n) { softmax_rows(x, 1, n, n); }

double log_sum_exp(const float* x, size_t n) {
  if (n == 0) return -std::numeric_limits<double>::infinity();
  const float max = row_max(x, n);
  if (!std::isfinite(max)) return max;  // all −inf (log 0), or an infinity or NaN that decides it
  // The exponentials by the vectorised kernel a block at a time (a vocabulary's row is 10^5
  // values: std::exp in double was most of a log-probability's cost), summed in double.
  constexpr size_t kBlock = 2048;
  float block[kBlock];
  double lanes[4] = {0, 0, 0, 0};
  for (size_t i = 0; i < n; i += kBlock) {
    const size_t m = std::min(kBlock, n - i);
    std::copy(x + i, x + i + m, block);
    exp_shifted_in_place(block, m, max);
    size_t j = 0;
    for (; j + 4 <= m; j += 4)
      for (size_t l = 0; l < 4; ++l) lanes[l] += block[j + l];
    for (; j < m; ++j) lanes[0] += block[j];
  }
  return double(max) + std::log((lanes[0] + lanes[1]) + (lanes[2] + lanes[3]));
}

void softmax_rows(float* x, size_t rows, size_t stride, size_t n, const float* sinks) {
  if (n == 0) return;
  float sink_terms[4];
  for (size_t r0 = 0; r0 < rows; r0 += 4) {
    const size_t group = std::min<size_t>(4, rows - r0);
    for (size_t r = 0; r < group; ++r) {
      float* row = x + (r0 + r) * stride;
      float max = row_max(row, n);
      if (sinks) {
        const float sink = sinks[r0 + r];
        if (max < sink) max = sink;  // a NaN maximum stays
        sink_terms[r] = sink;
        exp_shifted_in_place(&sink_terms[r], 1, max);
      }
      exp_shifted_in_place(row, n, max);
    }
    float sums[4];
    sums_side_by_side(x + r0 * stride, group, stride, n, sums, [](float v) { return v; });
    for (size_t r = 0; r < group; ++r) divide(x + (r0 + r) * stride, n, sinks ? sums[r] + sink_terms[r] : sums[r]);
  }
}

void gated_activation(float* gate, const float* up, size_t n, Activation act, float limit) {
  if (act == Activation::swiglu_clamped) {  // the exponentials a block at a time, as silu's
    constexpr float kAlpha = 1.702f;
    constexpr size_t kBlock = 256;
    float e[kBlock];
    for (size_t i0 = 0; i0 < n; i0 += kBlock) {
      const size_t m = std::min(kBlock, n - i0);
      for (size_t i = 0; i < m; ++i) e[i] = -(std::min(gate[i0 + i], limit) * kAlpha);
      exp_in_place(e, m);
      for (size_t i = 0; i < m; ++i) {
        const float g = std::min(gate[i0 + i], limit), u = std::clamp(up[i0 + i], -limit, limit);
        gate[i0 + i] = (u + 1.0f) * (g * (1.0f / (1.0f + e[i])));
      }
    }
    return;
  }
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
  // GELU, tanh form: ½ g (1 + tanh z) = g / (1 + e^(−2z)), z = √(2/π) (g + 0.044715 g³); the
  // exponentials exp.h's (the same bits on every CPU), a block at a time.
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  constexpr size_t kBlock = 256;
  float e[kBlock];
  for (size_t i0 = 0; i0 < n; i0 += kBlock) {
    const size_t m = std::min(kBlock, n - i0);
    for (size_t i = 0; i < m; ++i) {
      const float g = gate[i0 + i];
      e[i] = -2.0f * (kSqrt2OverPi * (g + 0.044715f * g * g * g));
    }
    exp_in_place(e, m);
    for (size_t i = 0; i < m; ++i) gate[i0 + i] = gate[i0 + i] / (1.0f + e[i]) * up[i0 + i];
  }
}

}  // namespace larql
