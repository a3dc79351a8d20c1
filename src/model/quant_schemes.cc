#include "model/quant_schemes.h"

namespace larql {
namespace {

bool fits(DType t, size_t cols) { return cols % dtype_traits(t).block_values == 0; }

// llama.cpp's fallback for rows its K-quant blocks do not divide.
DType fallback(DType t, size_t cols) {
  switch (t) {
    case DType::q4_k: t = DType::q5_0; break;
    case DType::q5_k: t = DType::q5_1; break;
    case DType::q6_k: t = DType::q8_0; break;
    case DType::f32:
    case DType::f16:
    case DType::bf16:
    case DType::q8_0:
    case DType::q4_0:
    case DType::q4_1:
    case DType::q5_0:
    case DType::q5_1:
    case DType::mxfp4: break;
  }
  return fits(t, cols) ? t : DType::f16;
}

}  // namespace

DType matrix_type(const QuantScheme& scheme, const TensorEntry& e, size_t layer, size_t layers, size_t cols, bool tied,
                  bool pure, size_t experts) {
  DType t = scheme.base;
  if (scheme.mixed && !pure && !scheme.mxfp4_experts) {
    // llama.cpp gives tied token embeddings the classifier's type, and counts Gemma 4's
    // per-layer table as one of them.
    const bool token_table = e.model_member == &Model::embed || e.model_member == &Model::ple_embed;
    const bool classifier = e.model_member == &Model::classifier || (tied && token_table);
    if (classifier) t = !fits(t, cols) ? DType::q8_0 : t != DType::q8_0 ? DType::q6_k : t;
    else if (scheme.more_bits && (e.layer_member == &LayerWeights::wv || e.layer_member == &LayerWeights::down) &&
             use_more_bits(layer, layers))
      t = DType::q6_k;
    // llama.cpp: "for the 8-expert model, bumping this to Q8_0 trades just ~128MB".
    if (experts == 8 && (e.layer_member == &LayerWeights::wk || e.layer_member == &LayerWeights::wv)) t = DType::q8_0;
    if (experts == 8 && e.layer_member == &LayerWeights::wo && scheme.base == DType::q4_k && scheme.more_bits) t = DType::q5_k;
  }
  return fits(t, cols) ? t : fallback(t, cols);
}

DType expert_matrix_type(const QuantScheme& scheme, bool down, size_t layer, size_t layers, size_t cols, bool pure) {
  DType t = scheme.mxfp4_experts ? DType::mxfp4 : scheme.base;
  if (scheme.mixed && !pure && scheme.more_bits && down && use_more_bits(layer, layers)) t = DType::q6_k;
  return fits(t, cols) ? t : fallback(t, cols);
}

}  // namespace larql
