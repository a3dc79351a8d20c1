#include "infer/local_ffn.h"

#include "kernels/matvec.h"

namespace larql {

Status LocalFfn::forward(uint32_t layer, std::span<const float> x, size_t rows, std::span<float> out) {
  const ModelConfig& c = model_.config;
  if (layer >= c.layers)
    return make_error(ErrorCode::layer_out_of_range,
                      "layer " + std::to_string(layer) + " is out of range: the model has " + std::to_string(c.layers) + " layers");
  if (x.size() != rows * c.hidden || out.size() != rows * c.hidden)
    return make_error(ErrorCode::internal, "FFN input/output sizes do not match rows × hidden");
  // Gemma 4's sparse layers keep a dense FFN, which is this one; their experts are the client's.
  if (c.layer(layer).sparse && !c.moe.beside_dense) return moe_.forward(layer, x, rows, out);
  const LayerWeights& w = model_.layers[layer];
  gate_.resize(rows * c.ffn);
  up_.resize(rows * c.ffn);
  const Product gate_up[] = {{&w.gate, gate_.data()}, {&w.up, up_.data()}};
  matmul_shared_input(gate_up, x.data(), rows, pool_);
  pool_.parallel_rows(rows, c.ffn, [&](size_t begin, size_t end) {
    gated_activation(gate_.data() + begin * c.ffn, up_.data() + begin * c.ffn, (end - begin) * c.ffn, c.activation);
  });
  matmul(w.down, gate_.data(), rows, out.data(), pool_);
  return Ok{};
}

}  // namespace larql
