#include "infer/local_ffn.h"

#include "kernels/matvec.h"

namespace larql {

Status LocalFfn::check_layer(uint32_t layer, size_t x_size, size_t rows) const {
  const ModelConfig& c = model_.config;
  if (layer >= c.layers)
    return make_error(ErrorCode::layer_out_of_range,
                      "layer " + std::to_string(layer) + " is out of range: the model has " + std::to_string(c.layers) + " layers");
  if (x_size != rows * c.hidden) return make_error(ErrorCode::internal, "FFN input size does not match rows × hidden");
  return Ok{};
}

Status LocalFfn::forward(uint32_t layer, std::span<const float> x, size_t rows, std::span<float> out) {
  const ModelConfig& c = model_.config;
  if (auto s = check_layer(layer, x.size(), rows); !s) return s;
  if (out.size() != rows * c.hidden) return make_error(ErrorCode::internal, "FFN output size does not match rows × hidden");
  // Gemma 4's sparse layers keep a dense FFN, which is this one; their experts are the client's.
  if (c.layer(layer).sparse && !c.moe.beside_dense) return moe_.forward(layer, x, rows, out);
  const LayerWeights& w = model_.layers[layer];
  const size_t width = c.ffn_width(layer);
  gate_.resize(rows * width);
  up_.resize(rows * width);
  const Product gate_up[] = {{&w.gate, gate_.data()}, {&w.up, up_.data()}};
  matmul_shared_input(gate_up, x.data(), rows, pool_);
  pool_.parallel_rows(rows, width, [&](size_t begin, size_t end) {
    gated_activation(gate_.data() + begin * width, up_.data() + begin * width, (end - begin) * width, c.activation, c.swiglu_limit);
  });
  matmul(w.down, gate_.data(), rows, out.data(), pool_);
  return Ok{};
}

Status LocalFfn::check_experts(uint32_t layer, size_t x_size, size_t rows, std::span<const ExpertAssignment> assignments,
                               size_t out_rows, size_t out_size) const {
  if (auto s = check_layer(layer, x_size, rows); !s) return s;
  if (!model_.config.layer(layer).sparse)
    return make_error(ErrorCode::not_moe_layer, "layer " + std::to_string(layer) + " has no routed experts");
  if (out_size != out_rows * model_.config.hidden)
    return make_error(ErrorCode::internal, "expert output size does not match its rows × hidden");
  return wire::check_assignments(assignments, uint32_t(rows), uint32_t(model_.config.moe.expert_ids()));
}

Status LocalFfn::experts(uint32_t layer, std::span<const float> x, size_t rows, std::span<const ExpertAssignment> assignments,
                         std::span<float> out) {
  if (auto s = check_experts(layer, x.size(), rows, assignments, rows, out.size()); !s) return s;
  moe_.run_experts(layer, x.data(), rows, assignments, out.data(), ExpertOutput::weighted_sums);
  return Ok{};
}

Status LocalFfn::expert_rows(uint32_t layer, std::span<const float> x, size_t rows,
                             std::span<const ExpertAssignment> assignments, std::span<float> out) {
  if (auto s = check_experts(layer, x.size(), rows, assignments, assignments.size(), out.size()); !s) return s;
  moe_.run_experts(layer, x.data(), rows, assignments, out.data(), ExpertOutput::expert_rows);
  return Ok{};
}

}  // namespace larql
