#include "model/llama2c_writer.h"

#include <cmath>
#include <cstdint>
#include <fstream>
#include <limits>

#include "model/rope_rows.h"

namespace larql {
namespace {

Error refuse(const std::string& what) {
  return make_error(ErrorCode::invalid_argument, "cannot write a llama2.c checkpoint: " + what);
}

// What of `m` run.c would compute differently, or nullopt when it computes `m` as is.
std::optional<std::string> unsupported(const Model& m) {
  const ModelConfig& c = m.config;
  if (c.norm_placement != NormPlacement::pre || c.norm_weight_offset != 0 || c.embedding_scale != 1 ||
      c.attention_softcap != 0 || c.final_softcap != 0 || c.value_norm || c.layer_scalar || c.qk_norm ||
      c.attention_bias || c.activation != Activation::silu)
    return "family '" + c.family + "' is not a plain Llama (run.c has no norms, scales, caps or biases beyond Llama's)";
  if (c.norm_eps != 1e-5f) return "rms_norm_eps is " + std::to_string(c.norm_eps) + "; run.c hard-codes 1e-5";
  if (c.head_dim * c.heads != c.hidden)
    return "head_dim " + std::to_string(c.head_dim) + " × " + std::to_string(c.heads) + " heads is not hidden " +
           std::to_string(c.hidden) + "; run.c derives head_dim from them";
  if (c.attention_scale != 0 && c.attention_scale != 1.0f / std::sqrt(float(c.head_dim)))
    return "attention_scale is not 1/√head_dim";
  if (m.rope_freqs.data) return "the model has RoPE frequency factors";
  for (size_t l = 0; l < c.layers; ++l) {
    const LayerConfig& lc = c.layer(l);
    const RopeSpec& r = lc.rope;
    if (lc.attention != AttentionKind::full || lc.head_dim != c.head_dim || lc.kv_heads != c.kv_heads || lc.values_are_keys)
      return "layer " + std::to_string(l) + " differs from the others (run.c's layers are all alike, full attention)";
    if (r.theta != 10000.0f || r.linear_factor != 1 || r.llama3 || r.rotated_pairs != 0)
      return "layer " + std::to_string(l) + "'s RoPE is not θ 10000 on every pair; run.c hard-codes that";
  }
  for (const auto& lw : m.layers)
    for (const Matrix* w : {&lw.wq, &lw.wk, &lw.wv, &lw.wo, &lw.gate, &lw.up, &lw.down})
      if (dtype_is_blocked(w->dtype))
        return "weights are " + std::string(dtype_name(w->dtype)) + "; export from the f32, f16 or bf16 model";
  if (c.vocab > size_t(std::numeric_limits<int32_t>::max()) || c.context > size_t(std::numeric_limits<int32_t>::max()))
    return "vocab or context does not fit the header's int32";
  return std::nullopt;
}

class F32Writer {
 public:
  explicit F32Writer(const std::string& path) : out_(path, std::ios::binary | std::ios::trunc) {}
  bool ok() const { return bool(out_); }
  void raw(const void* p, size_t bytes) { out_.write(static_cast<const char*>(p), std::streamsize(bytes)); }
  void floats(const std::vector<float>& v) { raw(v.data(), v.size() * sizeof(float)); }
  void matrix(const Matrix& m) {
    std::vector<float> row(m.cols);
    for (size_t r = 0; r < m.rows; ++r) {
      for (size_t i = 0; i < m.cols; ++i) row[i] = load_as_f32(m.dtype, m.data, r * m.cols + i);
      floats(row);
    }
  }
  // q or k rows in run.c's adjacent-pairs layout, whatever layout the model stores.
  void rope_rows(const Matrix& m, size_t heads, size_t head_dim, RopeLayout stored) {
    if (stored == RopeLayout::adjacent_pairs) return matrix(m);
    std::vector<float> all(m.rows * m.cols);
    for (size_t i = 0; i < all.size(); ++i) all[i] = load_as_f32(m.dtype, m.data, i);
    floats(reorder_rope_rows(all, heads, head_dim, m.cols, RopeLayout::adjacent_pairs));
  }
  bool close() {
    out_.close();
    return bool(out_);
  }

 private:
  std::ofstream out_;
};

}  // namespace

Status write_llama2c(const Model& m, const std::string& path) {
  if (auto why = unsupported(m)) return refuse(*why);
  const ModelConfig& c = m.config;
  F32Writer w(path);
  if (!w.ok()) return make_error(ErrorCode::invalid_argument, path + ": cannot open for writing");
  const bool tied = m.classifier.data == m.embed.data;
  const int32_t header[7] = {int32_t(c.hidden), int32_t(c.ffn),      int32_t(c.layers),
                             int32_t(c.heads),  int32_t(c.kv_heads), tied ? int32_t(c.vocab) : -int32_t(c.vocab),
                             int32_t(c.context)};
  w.raw(header, sizeof header);
  w.matrix(m.embed);
  auto each_layer = [&](auto&& f) {
    for (const LayerWeights& l : m.layers) f(l);
  };
  each_layer([&](const LayerWeights& l) { w.matrix(l.attn_norm); });
  each_layer([&](const LayerWeights& l) { w.rope_rows(l.wq, c.heads, c.head_dim, c.rope_layout); });
  each_layer([&](const LayerWeights& l) { w.rope_rows(l.wk, c.kv_heads, c.head_dim, c.rope_layout); });
  each_layer([&](const LayerWeights& l) { w.matrix(l.wv); });
  each_layer([&](const LayerWeights& l) { w.matrix(l.wo); });
  each_layer([&](const LayerWeights& l) { w.matrix(l.ffn_norm); });
  each_layer([&](const LayerWeights& l) { w.matrix(l.gate); });
  each_layer([&](const LayerWeights& l) { w.matrix(l.down); });
  each_layer([&](const LayerWeights& l) { w.matrix(l.up); });
  w.matrix(m.final_norm);
  // The legacy RoPE tables (cos, then sin, per position and pair) that old run.c versions read.
  const size_t half = c.head_dim / 2;
  std::vector<float> cosines(c.context * half), sines(c.context * half);
  for (size_t pos = 0; pos < c.context; ++pos)
    for (size_t i = 0; i < half; ++i) {
      const float freq = 1.0f / std::pow(10000.0f, float(2 * i) / float(c.head_dim));
      cosines[pos * half + i] = std::cos(float(pos) * freq);
      sines[pos * half + i] = std::sin(float(pos) * freq);
    }
  w.floats(cosines);
  w.floats(sines);
  if (!tied) w.matrix(m.classifier);
  if (!w.close()) return make_error(ErrorCode::invalid_argument, path + ": write failed (disk full?)");
  return Ok{};
}

}  // namespace larql
