// Element-wise transformer operations (plain C++ but for their exponentials, kernels/exp.h,
// and softmax's maximum: they are a small share of the time).
#pragma once

#include <cstddef>

#include "kernels/dtype.h"

namespace larql {

// out = (weight_offset + weight) ⊙ x / sqrt(mean(x²) + eps). `weight` is a vector of any
// stored type, or empty for a norm without weight (then out = x / rms); out may be x.
void rmsnorm(float* out, const float* x, const Matrix& weight, size_t n, float eps, float weight_offset = 0.0f);

// The same over `rows` rows of n values (row r at x + r · n, into out + r · n): each row's
// bits as rmsnorm() gives them, the rows' sums of squares side by side (one row's is a
// chain of dependent adds).
void rmsnorm_rows(float* out, const float* x, size_t rows, const Matrix& weight, size_t n, float eps, float weight_offset = 0.0f);

// rows[t][i] += bias[i] for t < n, each row bias.cols wide; nothing when bias is empty
// (attention's biases, a router's, an expert's).
void add_bias_rows(float* rows, size_t n, const Matrix& bias);

// x = cap · tanh(x / cap), Gemma's soft cap on attention scores and logits.
void softcap(float* x, size_t n, float cap);

// In-place softmax over n values: e^(x[i] - max) by exp_in_place, summed in increasing i,
// each divided by the sum. A NaN's sign and payload are not part of this: which NaN an add
// of two returns depends on an operand order the compiler may choose.
void softmax(float* x, size_t n);

// log Σ e^x[i] over n values, summed in double around their maximum: log-softmax's
// normaliser, as log-probabilities and perplexity need it. Each e^(x[i] − max) is the f32
// exponential kernel's (within half an ulp), so the result is within about 1e-7 of the
// exact value; −inf values count as 0, and n = 0 gives −inf.
double log_sum_exp(const float* x, size_t n);

// The same softmax over `rows` rows of n values, row r at x + r · stride (attention's
// query heads that share keys): each row's bits as softmax() gives them, the rows' sums
// run side by side (one row's is a chain of dependent adds). With sinks, row r has one
// more logit, sinks[r], in its maximum and its sum (added last), and no place in x
// (GPT-OSS's attention sinks).
void softmax_rows(float* x, size_t rows, size_t stride, size_t n, const float* sinks = nullptr);

// gate[i] = act(gate[i]) * up[i], for the gated FFN activations we support. swiglu_clamped
// is GPT-OSS's: g = min(gate, limit), u = clamp(up, −limit, limit),
// gate[i] = (u + 1) · (g · σ(1.702 · g)), as transformers' GptOssExperts orders it.
enum class Activation { silu, gelu_tanh, swiglu_clamped };
void gated_activation(float* gate, const float* up, size_t n, Activation act, float limit = 0);

}  // namespace larql
