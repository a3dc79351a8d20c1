#include "infer/moe_ffn.h"

#include "kernels/exp.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/matvec.h"
#include "kernels/ops.h"

namespace larql {

Status MoeFfn::forward(uint32_t layer, std::span<const float> x, size_t rows, std::span<float> out) {
  if (auto s = route(layer, x.data(), rows, assignments_); !s) return s;
  run_experts(layer, x.data(), rows, assignments_, out.data());
  return Ok{};
}

Status MoeFfn::route(uint32_t layer, const float* router_input, size_t rows, std::vector<ExpertAssignment>& out) {
  const ModelConfig& c = model_.config;
  const LayerWeights& w = model_.layers[layer];
  const size_t E = c.moe.experts, K = c.moe.experts_used, S = c.moe.shared_experts;
  logits_.resize(rows * (E + S));
  matmul(w.router, router_input, rows, logits_.data(), pool_);
  add_bias_rows(logits_.data(), rows, w.router_bias);
  if (S) matmul(w.shared_expert_gate, router_input, rows, &logits_[rows * E], pool_);
  choices_.resize(K);
  out.clear();
  for (size_t t = 0; t < rows; ++t) {
    if (auto s = larql::route({&logits_[t * E], E}, c.moe, choices_); !s)
      return make_error(s.error().code, "layer " + std::to_string(layer) + ", position " + std::to_string(t) + ": " + s.error().message);
    for (const ExpertChoice& choice : choices_) {  // in ascending expert id
      float weight = choice.weight;
      if (w.expert_scale.data) weight *= load_as_f32(w.expert_scale.dtype, w.expert_scale.data, choice.expert);
      out.push_back({uint32_t(t), choice.expert, weight});
    }
    for (size_t j = 0; j < S; ++j) {  // the shared experts, after the routed ones (their ids follow)
      const float gate = logits_[rows * E + t * S + j];
      if (!std::isfinite(gate))
        return make_error(ErrorCode::non_finite_output, "layer " + std::to_string(layer) + ", position " + std::to_string(t) +
                                                            ": the shared expert's gate logit is not finite");
      out.push_back({uint32_t(t), uint32_t(E + j), 1.0f / (1.0f + exp_f32(-gate))});
    }
  }
  return Ok{};
}

void MoeFfn::add_expert_biases(const LayerWeights& w, Matrix ExpertWeights::*bias, float* rows, bool inner) {
  // (A family's experts all have the bias or none do: GPT-OSS's have; no job for the rest.)
  if (w.experts.empty() || !(w.experts.front().*bias).data) return;
  const size_t n = row_expert_.size(), H = model_.config.hidden;
  pool_.parallel_rows(n, H, [&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) add_bias_rows(rows + (inner ? row_inner_[i] : i * H), 1, w.experts[row_expert_[i]].*bias);
  });
}

void MoeFfn::run_experts(uint32_t layer, const float* x, size_t rows, std::span<const ExpertAssignment> assignments,
                         float* out, ExpertOutput kind) {
  const ModelConfig& c = model_.config;
  const LayerWeights& w = model_.layers[layer];
  const size_t E = c.moe.expert_ids(), H = c.hidden, n = assignments.size();
  members_.resize(E);
  for (auto& m : members_) m.clear();
  for (size_t i = 0; i < n; ++i) members_[assignments[i].expert].push_back(uint32_t(i));

  // Each assigned expert once, over the rows routed to it, all of them in one job per
  // step (matmul_each: threads split (expert, rows) pieces, so that experts of very
  // different loads keep both busy). An expert that takes every row reads x itself (its
  // assignments are then in row order); the others read their rows gathered. Rows are
  // grouped by expert; a row's inner values (gate_, up_) are its expert's width (a shared
  // expert's may differ from the routed ones').
  offsets_.assign(E + 1, 0);
  for (size_t e = 0; e < E; ++e) offsets_[e + 1] = offsets_[e] + members_[e].size();
  row_expert_.resize(n);
  row_inner_.resize(n + 1);
  row_inner_[0] = 0;
  for (size_t e = 0; e < E; ++e) {
    const size_t width = w.experts[e].gate.rows;
    for (size_t i = offsets_[e]; i < offsets_[e + 1]; ++i) row_expert_[i] = uint32_t(e), row_inner_[i + 1] = row_inner_[i] + width;
  }
  const size_t inner_values = row_inner_[n];
  inputs_.resize(n * H);
  gate_.resize(inner_values);
  up_.resize(inner_values);
  products_.clear();
  for (size_t e = 0; e < E; ++e) {
    const auto& routed = members_[e];
    const size_t m = routed.size(), first = offsets_[e];
    if (m == 0) continue;
    const float* input = x;
    if (m != rows) {
      for (size_t i = 0; i < m; ++i) std::memcpy(&inputs_[(first + i) * H], x + assignments[routed[i]].row * H, H * sizeof(float));
      input = &inputs_[first * H];
    }
    const ExpertWeights& ex = w.experts[e];
    products_.push_back({&ex.gate, input, m, &gate_[row_inner_[first]]});
    products_.push_back({&ex.up, input, m, &up_[row_inner_[first]]});
  }
  matmul_each(products_, pool_);
  add_expert_biases(w, &ExpertWeights::gate_bias, gate_.data(), true);
  add_expert_biases(w, &ExpertWeights::up_bias, up_.data(), true);
  pool_.parallel_rows(n, inner_values / std::max<size_t>(n, 1), [&](size_t begin, size_t end) {
    const size_t first = row_inner_[begin];
    gated_activation(gate_.data() + first, up_.data() + first, row_inner_[end] - first, c.activation, c.swiglu_limit);
  });
  // Per-expert rows go straight to `out` when the experts' order is the assignments' (one
  // expert, or one row); otherwise through outputs_.
  output_row_.resize(n);
  for (size_t e = 0; e < E; ++e)
    for (size_t i = 0; i < members_[e].size(); ++i) output_row_[members_[e][i]] = offsets_[e] + i;
  bool in_order = true;
  for (size_t i = 0; i < n; ++i) in_order = in_order && output_row_[i] == i;
  float* expert_rows = kind == ExpertOutput::expert_rows && in_order ? out : (outputs_.resize(n * H), outputs_.data());
  products_.clear();
  for (size_t e = 0; e < E; ++e) {
    const size_t m = members_[e].size(), first = offsets_[e];
    if (m) products_.push_back({&w.experts[e].down, &gate_[row_inner_[first]], m, &expert_rows[first * H]});
  }
  matmul_each(products_, pool_);
  add_expert_biases(w, &ExpertWeights::down_bias, expert_rows, false);

  if (kind == ExpertOutput::expert_rows) {
    if (expert_rows != out)
      pool_.parallel_rows(n, H, [&](size_t begin, size_t end) {
        for (size_t i = begin; i < end; ++i) std::memcpy(out + i * H, &outputs_[output_row_[i] * H], H * sizeof(float));
      });
    return;
  }
  // The weighted sum in assignment order (ascending expert id within a row), without fused
  // multiply-adds (-ffp-contract=off): each product rounded, then added.
  row_first_.assign(rows + 1, n);
  for (size_t i = n; i-- > 0;) row_first_[assignments[i].row] = i;
  pool_.parallel_rows(rows, H, [&](size_t begin, size_t end) {
    for (size_t t = begin; t < end; ++t) {
      float* o = out + t * H;
      for (size_t i = row_first_[t]; i < n && assignments[i].row == t; ++i) {
        const float weight = assignments[i].weight;
        const float* y = &expert_rows[output_row_[i] * H];
        if (i == row_first_[t])
          for (size_t k = 0; k < H; ++k) o[k] = weight * y[k];
        else
          for (size_t k = 0; k < H; ++k) o[k] += weight * y[k];
      }
    }
  });
}

}  // namespace larql
