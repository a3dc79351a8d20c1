// `larql quantize`'s per-tensor choices against llama.cpp's llama_tensor_get_type for the
// same file types: the classifier, the _M mixes' attn_v/ffn_down layers, the fallbacks.
#include <gtest/gtest.h>

#include <vector>

#include "model/quant_schemes.h"

namespace larql {
namespace {

const TensorEntry& entry(Matrix Model::*member) {
  for (const auto& e : kTensorEntries)
    if (e.model_member == member) return e;
  throw std::logic_error("no such tensor");
}
const TensorEntry& entry(Matrix LayerWeights::*member) {
  for (const auto& e : kTensorEntries)
    if (e.layer_member == member) return e;
  throw std::logic_error("no such tensor");
}
const QuantScheme& scheme(std::string_view name) { return *find_quant_scheme(name); }

TEST(QuantSchemes, UseMoreBitsPicksLlamaCppsLayers) {
  // 32 layers: the first and last four, and every third from the sixth.
  std::vector<size_t> picked;
  for (size_t i = 0; i < 32; ++i)
    if (use_more_bits(i, 32)) picked.push_back(i);
  EXPECT_EQ(picked, (std::vector<size_t>{0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31}));
  picked.clear();
  for (size_t i = 0; i < 6; ++i)
    if (use_more_bits(i, 6)) picked.push_back(i);
  EXPECT_EQ(picked, (std::vector<size_t>{2, 5}));
}

TEST(QuantSchemes, MediumMixesGiveQ6_KToAttnVAndFfnDownOnThoseLayers) {
  for (const char* name : {"q4_k_m", "q5_k_m"}) {
    const DType base = scheme(name).base;
    for (size_t layer = 0; layer < 32; ++layer) {
      const DType more = use_more_bits(layer, 32) ? DType::q6_k : base;
      EXPECT_EQ(matrix_type(scheme(name), entry(&LayerWeights::wv), layer, 32, 4096, false), more) << name << " " << layer;
      EXPECT_EQ(matrix_type(scheme(name), entry(&LayerWeights::down), layer, 32, 14336, false), more) << name << " " << layer;
      EXPECT_EQ(matrix_type(scheme(name), entry(&LayerWeights::wq), layer, 32, 4096, false), base);
      EXPECT_EQ(matrix_type(scheme(name), entry(&LayerWeights::gate), layer, 32, 4096, false), base);
    }
  }
  EXPECT_EQ(matrix_type(scheme("q6_k"), entry(&LayerWeights::wv), 0, 32, 4096, false), DType::q6_k);
  EXPECT_EQ(matrix_type(scheme("q4_0"), entry(&LayerWeights::down), 0, 32, 4096, false), DType::q4_0);
}

// llama.cpp's n_expert == 8 rules (Mixtral): attn_k and attn_v Q8_0 in every quantised
// type, attn_output Q5_K in Q4_K_M; the experts' down follows ffn_down's layers.
TEST(QuantSchemes, EightExpertModelsKeepAttentionKAndVInQ8_0) {
  for (const char* name : {"q4_k_m", "q5_k_m", "q4_0", "q8_0"})
    for (size_t layer : {0u, 5u}) {
      EXPECT_EQ(matrix_type(scheme(name), entry(&LayerWeights::wk), layer, 32, 4096, false, false, 8), DType::q8_0) << name;
      EXPECT_EQ(matrix_type(scheme(name), entry(&LayerWeights::wv), layer, 32, 4096, false, false, 8), DType::q8_0) << name;
      EXPECT_EQ(matrix_type(scheme(name), entry(&LayerWeights::wv), layer, 32, 4096, false, false, 128), use_more_bits(layer, 32) && scheme(name).more_bits ? DType::q6_k : scheme(name).base) << name;
    }
  EXPECT_EQ(matrix_type(scheme("q4_k_m"), entry(&LayerWeights::wo), 3, 32, 4096, false, false, 8), DType::q5_k);
  EXPECT_EQ(matrix_type(scheme("q5_k_m"), entry(&LayerWeights::wo), 3, 32, 4096, false, false, 8), DType::q5_k);  // its base
  EXPECT_EQ(matrix_type(scheme("q4_k_m"), entry(&LayerWeights::wo), 3, 32, 4096, false, false, 0), DType::q4_k);
  EXPECT_EQ(matrix_type(scheme("f16"), entry(&LayerWeights::wk), 3, 32, 4096, false, false, 8), DType::f16) << "no rules";
  for (size_t layer = 0; layer < 12; ++layer) {
    EXPECT_EQ(expert_matrix_type(scheme("q4_k_m"), true, layer, 12, 768), use_more_bits(layer, 12) ? DType::q6_k : DType::q4_k);
    EXPECT_EQ(expert_matrix_type(scheme("q4_k_m"), false, layer, 12, 2048), DType::q4_k);
  }
  // Gemma 4 26B-A4B's experts are 704 wide: K-quant rows fall back.
  EXPECT_EQ(expert_matrix_type(scheme("q4_k_m"), true, 1, 12, 704), DType::q5_0);
  EXPECT_EQ(expert_matrix_type(scheme("q4_k_m"), true, 0, 12, 704), DType::q8_0);
}

TEST(QuantSchemes, TheClassifierIsQ6_KOrQ8_0) {
  EXPECT_EQ(matrix_type(scheme("q4_k_m"), entry(&Model::classifier), 0, 32, 4096, false), DType::q6_k);
  EXPECT_EQ(matrix_type(scheme("q4_0"), entry(&Model::classifier), 0, 32, 4096, false), DType::q6_k);
  EXPECT_EQ(matrix_type(scheme("q8_0"), entry(&Model::classifier), 0, 32, 4096, false), DType::q8_0);
  EXPECT_EQ(matrix_type(scheme("q4_k_m"), entry(&Model::classifier), 0, 32, 384, false), DType::q8_0);  // 384 % 256
  EXPECT_EQ(matrix_type(scheme("q4_0"), entry(&Model::classifier), 0, 32, 384, false), DType::q8_0);    // Q6_K's fallback
  // A tied embedding is the classifier; an untied one is an ordinary matrix.
  EXPECT_EQ(matrix_type(scheme("q4_k_m"), entry(&Model::embed), 0, 32, 4096, true), DType::q6_k);
  EXPECT_EQ(matrix_type(scheme("q4_k_m"), entry(&Model::embed), 0, 32, 4096, false), DType::q4_k);
  // The element types have no rules.
  EXPECT_EQ(matrix_type(scheme("bf16"), entry(&Model::classifier), 0, 32, 4096, false), DType::bf16);
}

TEST(QuantSchemes, RowsTheBlocksDoNotDivideFallBack) {
  EXPECT_EQ(matrix_type(scheme("q4_k_m"), entry(&LayerWeights::wq), 1, 32, 384, false), DType::q5_0);
  EXPECT_EQ(matrix_type(scheme("q5_k_m"), entry(&LayerWeights::wq), 1, 32, 384, false), DType::q5_1);
  EXPECT_EQ(matrix_type(scheme("q6_k"), entry(&LayerWeights::wq), 1, 32, 384, false), DType::q8_0);
  EXPECT_EQ(matrix_type(scheme("q4_k_m"), entry(&LayerWeights::wv), 0, 32, 384, false), DType::q8_0);  // Q6_K's
  EXPECT_EQ(matrix_type(scheme("q4_k_m"), entry(&LayerWeights::wq), 1, 32, 100, false), DType::f16);
  EXPECT_EQ(matrix_type(scheme("q8_0"), entry(&LayerWeights::wq), 1, 32, 100, false), DType::f16);
}

TEST(QuantSchemes, PureKeepsEveryMatrixInTheType) {
  EXPECT_EQ(matrix_type(scheme("q4_k_m"), entry(&Model::classifier), 0, 32, 4096, false, true), DType::q4_k);
  EXPECT_EQ(matrix_type(scheme("q4_k_m"), entry(&LayerWeights::wv), 0, 32, 4096, false, true), DType::q4_k);
  EXPECT_EQ(matrix_type(scheme("q4_k_m"), entry(&LayerWeights::wv), 0, 32, 384, false, true), DType::q5_0);
}

TEST(QuantSchemes, FileTypesAreLlamaCpps) {
  // enum llama_ftype in llama.h
  EXPECT_EQ(scheme("f16").llama_ftype, 1u);
  EXPECT_EQ(scheme("q8_0").llama_ftype, 7u);
  EXPECT_EQ(scheme("q4_k_m").llama_ftype, 15u);
  EXPECT_EQ(scheme("q5_k_m").llama_ftype, 17u);
  EXPECT_EQ(scheme("q6_k").llama_ftype, 18u);
  EXPECT_EQ(scheme("bf16").llama_ftype, 32u);
  EXPECT_EQ(find_quant_scheme("q3_k_m"), nullptr);
}

}  // namespace
}  // namespace larql
