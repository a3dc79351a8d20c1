#include "infer/moe_ffn.h"

#include <cstring>

#include "kernels/matvec.h"

namespace larql {

Status MoeFfn::forward(uint32_t layer, std::span<const float> x, size_t rows, std::span<float> out) {
  if (auto s = route(layer, x.data(), rows); !s) return s;
  run_experts(layer, x.data(), rows, out.data());
  return Ok{};
}

Status MoeFfn::route(uint32_t layer, const float* router_input, size_t rows) {
  const ModelConfig& c = model_.config;
  const LayerWeights& w = model_.layers[layer];
  const size_t E = c.moe.experts, K = c.moe.experts_used;
  logits_.resize(rows * E);
  matmul(w.router, router_input, rows, logits_.data(), pool_);
  choices_.resize(rows * K);
  members_.resize(E);
  for (auto& m : members_) m.clear();
  for (size_t t = 0; t < rows; ++t) {
    if (auto s = larql::route({&logits_[t * E], E}, c.moe, {&choices_[t * K], K}); !s)
      return make_error(s.error().code, "layer " + std::to_string(layer) + ", position " + std::to_string(t) + ": " + s.error().message);
    for (size_t j = 0; j < K; ++j) {
      ExpertChoice& choice = choices_[t * K + j];
      if (w.expert_scale.data) choice.weight *= load_as_f32(w.expert_scale.dtype, w.expert_scale.data, choice.expert);
      members_[choice.expert].push_back(uint32_t(t * K + j));
    }
  }
  return Ok{};
}

void MoeFfn::run_experts(uint32_t layer, const float* x, size_t rows, float* out) {
  const ModelConfig& c = model_.config;
  const LayerWeights& w = model_.layers[layer];
  const size_t E = c.moe.experts, K = c.moe.experts_used, I = c.moe.expert_ffn, H = c.hidden;

  // Each chosen expert once, over the positions routed to it, all of them in one job per
  // step (matmul_each: threads split (expert, rows) pieces, so that experts of very
  // different loads keep both busy). An expert that takes every row reads x itself; the
  // others read their rows gathered.
  offsets_.assign(E + 1, 0);
  for (size_t e = 0; e < E; ++e) offsets_[e + 1] = offsets_[e] + members_[e].size();
  const size_t routed_rows = offsets_[E];
  inputs_.resize(routed_rows * H);
  gate_.resize(routed_rows * I);
  up_.resize(routed_rows * I);
  outputs_.resize(routed_rows * H);
  products_.clear();
  for (size_t e = 0; e < E; ++e) {
    const auto& routed = members_[e];
    const size_t n = routed.size(), first = offsets_[e];
    if (n == 0) continue;
    const float* input = x;
    if (n != rows) {
      for (size_t i = 0; i < n; ++i) std::memcpy(&inputs_[(first + i) * H], x + routed[i] / K * H, H * sizeof(float));
      input = &inputs_[first * H];
    }
    const ExpertWeights& ex = w.experts[e];
    products_.push_back({&ex.gate, input, n, &gate_[first * I]});
    products_.push_back({&ex.up, input, n, &up_[first * I]});
  }
  matmul_each(products_, pool_);
  pool_.parallel_rows(routed_rows, I, [&](size_t begin, size_t end) {
    gated_activation(gate_.data() + begin * I, up_.data() + begin * I, (end - begin) * I, c.activation);
  });
  products_.clear();
  for (size_t e = 0; e < E; ++e) {
    const size_t n = members_[e].size(), first = offsets_[e];
    if (n) products_.push_back({&w.experts[e].down, &gate_[first * I], n, &outputs_[first * H]});
  }
  matmul_each(products_, pool_);
  // Where each (position, slot)'s expert output row is in outputs_.
  output_row_.resize(rows * K);
  for (size_t e = 0; e < E; ++e)
    for (size_t i = 0; i < members_[e].size(); ++i) output_row_[members_[e][i]] = offsets_[e] + i;

  // The weighted sum in ascending expert id (the choices are sorted so), without fused
  // multiply-adds (-ffp-contract=off): each product rounded, then added.
  pool_.parallel_rows(rows, H, [&](size_t begin, size_t end) {
    for (size_t t = begin; t < end; ++t) {
      float* o = out + t * H;
      for (size_t j = 0; j < K; ++j) {
        const float weight = choices_[t * K + j].weight;
        const float* y = &outputs_[output_row_[t * K + j] * H];
        if (j == 0)
          for (size_t i = 0; i < H; ++i) o[i] = weight * y[i];
        else
          for (size_t i = 0; i < H; ++i) o[i] += weight * y[i];
      }
    }
  });
}

}  // namespace larql
