#include "model/tensor_names.h"

#include "model/expert_tensors.h"

namespace larql {

std::string shape_string(const std::vector<size_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

std::string tensor_name(const TensorEntry& e, CheckpointFormat format, size_t layer) {
  const std::string_view base = format == CheckpointFormat::hf ? e.hf : e.gguf;
  if (base.empty() || !is_per_layer(e)) return std::string(base);
  const std::string prefix = format == CheckpointFormat::hf ? "model.layers." : "blk.";
  return prefix + std::to_string(layer) + "." + std::string(base);
}

std::vector<size_t> tensor_shape(const TensorEntry& e, const ModelConfig& c, size_t layer) {
  const bool per_layer = is_per_layer(e) && layer < c.layer_configs.size();
  const size_t head_dim = per_layer ? c.layer(layer).head_dim : c.head_dim;
  const size_t q = per_layer ? c.q_dim(layer) : c.q_dim(), kv = per_layer ? c.kv_dim(layer) : c.kv_dim();
  switch (e.shape) {
    case TensorShape::vocab_by_hidden: return {c.vocab, c.hidden};
    case TensorShape::hidden: return {c.hidden};
    case TensorShape::q_by_hidden: return {q, c.hidden};
    case TensorShape::kv_by_hidden: return {kv, c.hidden};
    case TensorShape::hidden_by_q: return {c.hidden, q};
    case TensorShape::q: return {q};
    case TensorShape::kv: return {kv};
    case TensorShape::head_dim: return {head_dim};
    case TensorShape::half_max_head_dim: return {c.max_head_dim() / 2};
    case TensorShape::ffn_by_hidden: return {per_layer ? c.ffn_width(layer) : c.ffn, c.hidden};
    case TensorShape::hidden_by_ffn: return {c.hidden, per_layer ? c.ffn_width(layer) : c.ffn};
    case TensorShape::one: return {1};
    case TensorShape::experts: return {c.moe.experts};
    case TensorShape::heads: return {c.heads};
    case TensorShape::ple_vocab_by_all_ple: return {c.ple_vocab, c.layers * c.ple_dim};
    case TensorShape::all_ple_by_hidden: return {c.layers * c.ple_dim, c.hidden};
    case TensorShape::ple: return {c.ple_dim};
    case TensorShape::ple_by_hidden: return {c.ple_dim, c.hidden};
    case TensorShape::hidden_by_ple: return {c.hidden, c.ple_dim};
    case TensorShape::shared_experts_by_hidden: return {c.moe.shared_experts, c.hidden};
  }
  return {};
}

bool tensor_applies(const TensorEntry& e, const ModelConfig& c, size_t layer) {
  if (is_kv_weight(e) && layer < c.layer_configs.size() && !c.owns_kv(layer)) return false;
  switch (e.presence) {
    case TensorPresence::required:
    case TensorPresence::optional: return true;
    case TensorPresence::if_attention_bias: return c.attention_bias;
    case TensorPresence::if_qk_norm: return c.qk_norm;
    case TensorPresence::if_pre_norms: return c.norm_placement == NormPlacement::pre;
    case TensorPresence::if_sandwich_norms: return c.norm_placement == NormPlacement::sandwich;
    case TensorPresence::if_own_values: return layer >= c.layer_configs.size() || !c.layer(layer).values_are_keys;
    case TensorPresence::if_layer_scalar: return c.layer_scalar;
    case TensorPresence::if_attention_sinks: return c.attention_sinks;
    case TensorPresence::if_per_layer_embeddings: return c.ple_dim > 0;
    case TensorPresence::if_dense_ffn: return layer >= c.layer_configs.size() || !c.layer(layer).sparse || c.moe.beside_dense;
    case TensorPresence::if_experts_beside_dense:
      return c.moe.beside_dense && layer < c.layer_configs.size() && c.layer(layer).sparse;
    case TensorPresence::if_shared_experts: return c.moe.shared_experts && layer < c.layer_configs.size() && c.layer(layer).sparse;
  }
  return false;
}

void for_each_tensor(const Model& m, const std::function<void(const TensorEntry&, size_t layer, const Matrix&)>& fn) {
  for (const TensorEntry& e : kTensorEntries) {
    if (e.model_member == &Model::classifier && m.classifier.data == m.embed.data) continue;
    for (size_t l = 0; l < (is_per_layer(e) ? m.layers.size() : 1); ++l) {
      if (!tensor_applies(e, m.config, l)) continue;
      const Matrix& matrix = is_per_layer(e) ? m.layers[l].*e.layer_member : m.*e.model_member;
      if (matrix.data) fn(e, l, matrix);
    }
  }
}

Status check_found_tensor(const FoundTensor& found, const std::string& name, const std::vector<size_t>& shape) {
  if (found.shape != shape)
    return make_error(ErrorCode::invalid_argument, found.file + ": tensor '" + name + "' has shape " + shape_string(found.shape) +
                                                       ", expected " + shape_string(shape) + " from the model's configuration");
  if (!found.dtype) {
    std::string supported;
    for (const auto& d : kDTypes) supported += (supported.empty() ? "" : ", ") + std::string(d.name);
    return make_error(ErrorCode::invalid_argument, found.file + ": tensor '" + name + "' is " + found.format_name +
                                                       ", which larql does not compute on yet; supported: " + supported);
  }
  const auto& traits = dtype_traits(*found.dtype);
  if (shape.back() % traits.block_values != 0)
    return make_error(ErrorCode::invalid_argument, found.file + ": tensor '" + name + "' is " + std::string(traits.name) +
                                                       " with rows of " + std::to_string(shape.back()) + " values, not a multiple of its " +
                                                       std::to_string(traits.block_values) + "-value blocks");
  return Ok{};
}

Status assemble_model(Model& m, CheckpointFormat format, const std::string& source,
                      const std::function<std::optional<FoundTensor>(const std::string& name)>& find) {
  const ModelConfig& c = m.config;
  m.layers.assign(c.layers, LayerWeights{});
  for (const TensorEntry& e : kTensorEntries) {
    for (size_t l = 0; l < (is_per_layer(e) ? c.layers : 1); ++l) {
      if (!tensor_applies(e, c, l)) continue;
      const std::vector<size_t> shape = tensor_shape(e, c, l);
      const std::string name = tensor_name(e, format, l);
      if (name.empty()) continue;
      const auto found = find(name);
      if (!found) {
        if (e.presence == TensorPresence::optional) continue;
        return make_error(ErrorCode::invalid_argument, source + ": tensor '" + name + "' is missing");
      }
      if (auto s = check_found_tensor(*found, name, shape); !s) return s;
      const Matrix matrix{*found->dtype, shape.size() == 2 ? shape[0] : 1, shape.back(), found->data};
      if (is_per_layer(e))
        m.layers[l].*e.layer_member = matrix;
      else
        m.*e.model_member = matrix;
    }
  }
  if (!m.classifier.data) m.classifier = m.embed;  // tied
  if (c.ple_dim) {
    // Each token reads layer l's part of its table row, which must start on a block.
    const size_t block = dtype_traits(m.ple_embed.dtype).block_values;
    if (c.ple_vocab == 0 || c.ple_dim % block != 0)
      return make_error(ErrorCode::invalid_argument, source + ": the per-layer embedding table has " + std::to_string(c.ple_vocab) +
                                                         " rows of " + std::to_string(c.ple_dim) + "-value layer parts; expected rows, "
                                                         "and parts a multiple of its " + std::to_string(block) + "-value blocks");
  }
  if (c.moe.experts) {
    const Family* family = find_family(c.family);
    return assemble_experts(m, format, family ? family->moe : nullptr, source, find);
  }
  return Ok{};
}

}  // namespace larql
