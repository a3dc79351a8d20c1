// Gemma 2, Gemma 3 and Gemma 4 (dense) against a PyTorch reference that follows transformers' modeling code
// (tools/gemma_reference.py), on tiny f32 checkpoints committed with its outputs: logits at
// every position of a sequence longer than the sliding window, prefill and token by token,
// and greedy ids; from the Hugging Face files and from a GGUF of the same weights written
// the way llama.cpp's converter writes Gemma (Gemma 2/3 norms + 1, no q/k permutation, no
// lm_head; Gemma 4's per-layer KV heads, head sizes, proportional RoPE as rope_freqs).
// Also: the other spellings of the config and of the multimodal checkpoint's names, and
// the embedding scale HF rounds to the checkpoint's dtype.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "infer/generate.h"
#include "infer/local_ffn.h"
#include "infer/transformer.h"
#include "model/gguf_loader.h"
#include "model/hf_tokenizer.h"
#include "model/loader.h"
#include "model/quant_schemes.h"
#include "model/safetensors.h"
#include "model/synth.h"
#include "support/reference_fixtures.h"
#include "support/greedy.h"
#include "support/js_tokenizers.h"

namespace larql {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class Gemma : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("larql_gemma_" + std::to_string(::getpid()) + "_" + GetParam());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_P(Gemma, HuggingFaceCheckpointMatchesThePyTorchReference) {
  auto model = load_model(test::gemma_fixture(GetParam()).string());
  ASSERT_TRUE(model.ok()) << model.error().message;
  EXPECT_EQ(model->config.norm_placement, NormPlacement::sandwich);
  EXPECT_EQ(model->config.norm_weight_offset, GetParam().starts_with("gemma4") ? 0.0f : 1.0f) << "Gemma 4 stores norm weights as used";
  EXPECT_EQ(model->classifier.data, model->embed.data) << "Gemma ties the classifier to the embedding";
  test::expect_matches_reference(*model, test::gemma_reference(GetParam()), GetParam() + " HF", 1e-5);
}

TEST_P(Gemma, GgufOfTheSameWeightsMatchesThePyTorchReference) {
  auto hf = load_model(test::gemma_fixture(GetParam()).string());
  ASSERT_TRUE(hf.ok()) << hf.error().message;
  const fs::path path = dir_ / "model.gguf";
  auto written = export_gguf(*hf, path.string(), {.scheme = *find_quant_scheme("f32"), .splits = 1});
  ASSERT_TRUE(written.ok()) << written.error().message;

  auto file = read_gguf(path.string());
  ASSERT_TRUE(file.ok()) << file.error().message;
  EXPECT_EQ(file->tensors.count("output.weight"), 0u) << "tied: no classifier tensor, as llama.cpp's converter writes";
  // Gemma 2/3 norms carry the +1 in the file, as converted by llama.cpp; q/k rows are not permuted.
  const GgufTensor& norm = file->tensors.at("blk.0.attn_norm.weight");
  const float* stored = reinterpret_cast<const float*>(norm.data);
  EXPECT_EQ(stored[3], hf->config.norm_weight_offset + load_as_f32(hf->layers[0].attn_norm.dtype, hf->layers[0].attn_norm.data, 3));
  EXPECT_EQ(0, std::memcmp(file->tensors.at("blk.0.attn_q.weight").data, hf->layers[0].wq.data, hf->layers[0].wq.bytes()));

  auto gguf = load_model(path.string());
  ASSERT_TRUE(gguf.ok()) << gguf.error().message;
  EXPECT_EQ(gguf->config.norm_weight_offset, 0.0f);
  EXPECT_EQ(gguf->config.score_scale(), hf->config.score_scale());
  ASSERT_EQ(gguf->config.layer_configs.size(), hf->config.layer_configs.size());
  for (size_t l = 0; l < hf->config.layers; ++l) {
    EXPECT_EQ(gguf->config.layer_configs[l].attention, hf->config.layer_configs[l].attention) << l;
    EXPECT_EQ(gguf->config.layer_configs[l].window, hf->config.layer_configs[l].window) << l;
    EXPECT_EQ(gguf->config.layer_configs[l].rope.theta, hf->config.layer_configs[l].rope.theta) << l;
    EXPECT_EQ(gguf->config.layer_configs[l].rope.linear_factor, hf->config.layer_configs[l].rope.linear_factor) << l;
    EXPECT_EQ(gguf->config.layer_configs[l].head_dim, hf->config.layer_configs[l].head_dim) << l;
    EXPECT_EQ(gguf->config.layer_configs[l].kv_heads, hf->config.layer_configs[l].kv_heads) << l;
    EXPECT_EQ(gguf->config.layer_configs[l].kv_from, hf->config.layer_configs[l].kv_from) << l;
    EXPECT_EQ(gguf->config.ffn_width(l), hf->config.ffn_width(l)) << l;
    // KV-shared layers have no K/V tensors; K=V layers no V tensor.
    const bool owns = hf->config.owns_kv(l);
    EXPECT_EQ(file->tensors.count("blk." + std::to_string(l) + ".attn_k.weight"), owns ? 1u : 0u) << l;
    if (owns) {
      EXPECT_EQ(gguf->config.layer_configs[l].values_are_keys, hf->config.layer_configs[l].values_are_keys) << l;
    }
    EXPECT_EQ(file->tensors.count("blk." + std::to_string(l) + ".attn_v.weight"),
              owns && !hf->config.layer_configs[l].values_are_keys ? 1u : 0u) << l;
  }
  EXPECT_EQ(gguf->config.ple_dim, hf->config.ple_dim);
  EXPECT_EQ(gguf->config.ple_vocab, hf->config.ple_vocab);
  test::expect_matches_reference(*gguf, test::gemma_reference(GetParam()), GetParam() + " GGUF", 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Families, Gemma, ::testing::Values("gemma2", "gemma3", "gemma4", "gemma4e"));

TEST(Gemma4, FullLayersHaveTheirOwnHeadsValuesAndProportionalRope) {
  auto model = load_model(test::gemma_fixture("gemma4").string());
  ASSERT_TRUE(model.ok()) << model.error().message;
  const ModelConfig& c = model->config;
  EXPECT_EQ(c.score_scale(), 1.0f);
  EXPECT_TRUE(c.value_norm && c.layer_scalar);
  for (size_t l = 0; l < c.layers; ++l) {
    const LayerConfig& lc = c.layer(l);
    const bool full = l == 5 || l == 7;  // the period's last, and the model's last (always full)
    EXPECT_EQ(lc.attention, full ? AttentionKind::full : AttentionKind::sliding) << l;
    EXPECT_EQ(lc.head_dim, full ? 32u : 16u) << l;
    EXPECT_EQ(lc.kv_heads, full ? 1u : 2u) << l;
    EXPECT_EQ(lc.values_are_keys, full) << l;
    EXPECT_EQ(model->layers[l].wv.data == nullptr, full) << "no v_proj on K=V layers";
    EXPECT_EQ(lc.rope.rotated_pairs, full ? 4u : 0u) << "partial_rotary_factor 0.25 of 16 pairs";
    EXPECT_EQ(lc.rope.theta, full ? 1e6f : 1e4f) << l;
  }
}

// A checkpoint in memory to rewrite under other names and config spellings.
struct Rewritten {
  json config;
  std::vector<TensorToWrite> tensors;
};

Rewritten read_fixture(const std::string& family, const std::string& prefix) {
  Rewritten r;
  std::ifstream(test::gemma_fixture(family) / "config.json") >> r.config;
  auto file = read_safetensors((test::gemma_fixture(family) / "model.safetensors").string());
  EXPECT_TRUE(file.ok());
  for (const auto& [name, t] : file->tensors)
    r.tensors.push_back({prefix + name.substr(std::string("model.").size()), t.dtype, t.shape,
                         std::vector<uint8_t>(t.data, t.data + t.bytes)});
  return r;
}

void write(const Rewritten& r, const fs::path& dir) {
  fs::create_directories(dir);
  std::ofstream(dir / "config.json") << r.config.dump(2);
  ASSERT_TRUE(write_safetensors((dir / "model.safetensors").string(), r.tensors).ok());
}

class GemmaMultimodal : public Gemma {};

TEST_P(GemmaMultimodal, ForConditionalGenerationRunsItsTextModelUnderEitherPrefix) {
  const std::string family = GetParam();
  for (const std::string prefix : {"language_model.model.", "model.language_model."}) {
    Rewritten r = read_fixture(family, prefix);
    r.config.erase("model_type");
    const std::string arch = family == "gemma3" ? "Gemma3ForConditionalGeneration" : "Gemma4ForConditionalGeneration";
    r.config = json{{"model_type", family.substr(0, 6)}, {"architectures", {arch}}, {"text_config", r.config}, {"vision_config", {{"hidden_size", 8}}}};
    r.tensors.push_back({"vision_tower.vision_model.embeddings.patch_embedding.weight", DType::f32, {8, 8},
                         std::vector<uint8_t>(8 * 8 * 4)});
    // Multimodal embeddings carry padding rows past the tokenizer's vocabulary.
    for (auto& t : r.tensors)
      if (t.name.ends_with("embed_tokens.weight")) {
        t.shape[0] += 64;
        t.bytes.resize(t.bytes.size() + 64 * t.shape[1] * 4);
      }
    const fs::path dir = dir_ / prefix;
    write(r, dir);
    auto model = load_model(dir.string());
    ASSERT_TRUE(model.ok()) << model.error().message;
    EXPECT_EQ(model->config.vocab, 256u + 64u) << "the vocabulary is the embedding's row count";
    ASSERT_EQ(model->notes.size(), 1u);
    EXPECT_NE(model->notes[0].find("skipped 1 tensors outside the text model"), std::string::npos) << model->notes[0];
    test::ReferenceOutput ref = test::gemma_reference(family);
    for (auto& row : ref.logits) row.resize(row.size() + 64, 0.0f);  // zero rows: logit 0 on the padding ids
    const auto got = test::all_logits(*model, ref.tokens, true);
    test::expect_logits_match(ref.logits, got, prefix);
  }
}

INSTANTIATE_TEST_SUITE_P(Families, GemmaMultimodal, ::testing::Values("gemma3", "gemma4", "gemma4e"));  // Gemma 2 has none

TEST(Gemma4, EModelAndMixtureOfExpertsConfigsAreCheckedNamingTheField) {
  const fs::path dir = fs::temp_directory_path() / ("larql_gemma4_refused_" + std::to_string(::getpid()));
  // gemma4e's layers: S S S S S F S S S F, the last 3 KV-shared.
  for (auto [key, value, expected] :
       {std::tuple{"num_kv_shared_layers", json(10), "must leave at least one of the 10 layers with a KV cache of its own"},
        {"num_kv_shared_layers", json(5), "KV-shared layer 5 is a full-attention layer, but no layer before the shared ones (0..4)"},
        {"num_kv_shared_layers", json(-1), "field 'num_kv_shared_layers' must be a whole number"},
        {"hidden_size_per_layer_input", json("8"), "field 'hidden_size_per_layer_input' must be a number"},
        {"hidden_size_per_layer_input", json(16), "tensor 'model.embed_tokens_per_layer.weight' has shape [256, 80], expected [256, 160]"},
        {"use_double_wide_mlp", json(false), "tensor 'model.layers.7.mlp.gate_proj.weight' has shape [128, 64], expected [64, 64]"},
        {"enable_moe_block", json(true), "field 'num_experts' must be a positive integer"}}) {
    Rewritten r = read_fixture("gemma4e", "model.");
    r.config[key] = value;
    write(r, dir);
    auto model = load_model(dir.string());
    ASSERT_FALSE(model.ok()) << key;
    EXPECT_NE(model.error().message.find(expected), std::string::npos) << model.error().message;
  }
  fs::remove_all(dir);
}

TEST(Gemma4, EModelSharedLayersReadTheLastEarlierLayerOfTheirKindAndHoldNoCache) {
  auto model = load_model(test::gemma_fixture("gemma4e").string());
  ASSERT_TRUE(model.ok()) << model.error().message;
  const ModelConfig& c = model->config;
  EXPECT_EQ(c.ple_dim, 8u);
  EXPECT_EQ(c.ple_vocab, 256u);
  // Layers 7 and 8 slide and read layer 6; 9 is full and reads 5 (llama.cpp's hard-coded
  // first−2 / first−1 would give 5 and 6, the other kind each).
  const std::vector<std::optional<size_t>> kv_from = {{}, {}, {}, {}, {}, {}, {}, 6, 6, 5};
  for (size_t l = 0; l < c.layers; ++l) {
    EXPECT_EQ(c.layer(l).kv_from, kv_from[l]) << l;
    EXPECT_EQ(c.ffn_width(l), kv_from[l] ? 128u : 64u) << "double-wide on KV-shared layers: " << l;
    EXPECT_EQ(model->layers[l].wk.data == nullptr, kv_from[l].has_value()) << l;
  }
  // A sequence's cache: keys and values of the 7 layers that own one, none for the others.
  ThreadPool pool(2);
  LocalFfn ffn(*model, pool);
  Transformer t(*model, ffn, pool);
  KvCache cache;
  const std::vector<int> tokens = test::gemma_reference("gemma4e").tokens;
  std::vector<float> logits;
  const SequenceChunk chunk{&cache, tokens, 0, tokens.size() - 1};
  ASSERT_TRUE(t.forward_batch({&chunk, 1}, logits).ok());
  size_t value_bytes = 0;
  for (size_t l = 0; l < c.layers; ++l) {
    EXPECT_EQ(cache.layers[l].keys.empty(), kv_from[l].has_value()) << l;
    for (const auto& head : cache.layers[l].values) value_bytes += head.size() * sizeof(float);
  }
  EXPECT_EQ(2 * value_bytes, tokens.size() * c.kv_bytes_per_position());
  // Layers 0..6, each of 32 key dimensions (2 heads of 16 sliding, 1 of 32 full): keys and values in f32.
  EXPECT_EQ(c.kv_bytes_per_position(), 7u * 2 * 32 * sizeof(float));
}

class GemmaSpelling : public Gemma {};

TEST_P(GemmaSpelling, OlderAndNewerConfigSpellingsGiveTheSameModel) {
  Rewritten r = read_fixture(GetParam(), "model.");
  json& c = r.config;
  const json layer_types = c["layer_types"];
  c.erase("layer_types");
  if (GetParam() == "gemma2") {
    // Older Gemma 2 files: no layer_types, even layers slide (the family's default).
    c["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 10000.0}};
  } else {
    // transformers v5: rope_parameters per layer type; older v4: sliding_window_pattern.
    c["sliding_window_pattern"] = 6;
    c["rope_parameters"] = {{"full_attention", {{"rope_type", "linear"}, {"factor", 8.0}, {"rope_theta", 1000000.0}}},
                            {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 10000.0}}}};
    for (const char* key : {"rope_theta", "rope_scaling", "rope_local_base_freq"}) c.erase(key);
  }
  write(r, dir_ / "respelled");
  auto original = load_model(test::gemma_fixture(GetParam()).string());
  auto respelled = load_model((dir_ / "respelled").string());
  ASSERT_TRUE(original.ok() && respelled.ok()) << (respelled.ok() ? "" : respelled.error().message);
  for (size_t l = 0; l < original->config.layers; ++l) {
    const LayerConfig &a = original->config.layer_configs[l], &b = respelled->config.layer_configs[l];
    EXPECT_EQ(a.attention, b.attention) << l;
    EXPECT_EQ(layer_types[l] == "sliding_attention", a.attention == AttentionKind::sliding) << l;
    EXPECT_EQ(a.window, b.window) << l;
    EXPECT_EQ(a.rope.theta, b.rope.theta) << l;
    EXPECT_EQ(a.rope.linear_factor, b.rope.linear_factor) << l;
  }
  test::expect_logits_match(test::gemma_reference(GetParam()).logits,
                            test::all_logits(*respelled, test::gemma_reference(GetParam()).tokens, true), "respelled");
}

INSTANTIATE_TEST_SUITE_P(Families, GemmaSpelling, ::testing::Values("gemma2", "gemma3"));  // Gemma 4 has one spelling

TEST(GemmaEmbedding, HuggingFaceRoundsTheScaleToTheCheckpointDtypeAndGgufDoesNot) {
  // √1152 = 33.941…: bf16 keeps 34, f16 33.94 (as HF's embed_scale.to(dtype)); GGUF: exact.
  const fs::path dir = fs::temp_directory_path() / ("larql_gemma_scale_" + std::to_string(::getpid()));
  for (auto [dtype, expected] : {std::pair{DType::bf16, 34.0f}, {DType::f16, 33.9375f}, {DType::f32, float(std::sqrt(1152.0))}}) {
    ASSERT_TRUE(write_synthetic_checkpoint(dir.string(), {.family = "gemma3", .hidden = 1152, .layers = 1, .ffn = 32, .heads = 1,
                                                          .kv_heads = 1, .head_dim = 32, .vocab = 256, .context = 8, .dtype = dtype})
                    .ok());
    auto model = load_model(dir.string());
    ASSERT_TRUE(model.ok()) << model.error().message;
    EXPECT_EQ(model->config.embedding_scale, expected) << dtype_name(dtype);
    if (dtype == DType::bf16) {
      ASSERT_TRUE(export_gguf(*model, (dir / "m.gguf").string(), {.scheme = *find_quant_scheme("f32"), .splits = 1}).ok());
      auto gguf = load_model((dir / "m.gguf").string());
      ASSERT_TRUE(gguf.ok()) << gguf.error().message;
      EXPECT_EQ(gguf->config.embedding_scale, std::sqrt(1152.0f));
    }
    fs::remove_all(dir);
  }
}

TEST(GemmaGeneration, StopsAtEveryIdOfGenerationConfigsEosList) {
  // Gemma's generation_config lists several (e.g. [1, 106]: <eos> and <end_of_turn>).
  auto model = load_model(test::gemma_fixture("gemma3").string());
  ASSERT_TRUE(model.ok()) << model.error().message;
  const test::ReferenceOutput ref = test::gemma_reference("gemma3");
  ThreadPool pool(1);
  LocalFfn ffn(*model, pool);
  for (size_t stop_at : {3, 5}) {  // as the second entry of the list, then as the first
    const int id = ref.greedy[stop_at];
    ASSERT_EQ(std::find(ref.greedy.begin(), ref.greedy.begin() + stop_at, id), ref.greedy.begin() + stop_at) << "a first occurrence";
    model->config.eos_ids = stop_at == 3 ? std::vector<int>{1, id} : std::vector<int>{id, 1};
    Transformer t(*model, ffn, pool);
    auto result = generate(t, ref.tokens, {.max_new_tokens = 8}, [](int) {});
    ASSERT_TRUE(result.ok()) << result.error().message;
    EXPECT_EQ(result->stop, StopReason::eos);
    EXPECT_EQ(result->generated, std::vector<int>(ref.greedy.begin(), ref.greedy.begin() + stop_at)) << "the end token itself is not part of the output";
  }
}

TEST(GemmaTokenizer, Gemma3TokenizerJsonAddsBosOnceAndKeepsTurnMarkersWhole) {
  const auto path = test::js_tokenizer_json("gemma3");
  ASSERT_TRUE(fs::exists(path)) << path << " is missing: scripts/install-js-tokenizers.sh installs it (make test runs it)";
  auto tok = HfTokenizer::load(path.string());
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  const auto ids = (*tok)->encode("<start_of_turn>user\nHello<end_of_turn>\n");
  ASSERT_GE(ids.size(), 4u);
  EXPECT_EQ(ids[0], 2) << "<bos>";
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 2), 1);
  EXPECT_EQ(ids[1], 105) << "<start_of_turn> is one token";
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 106), 1) << "<end_of_turn> is one token";
}

}  // namespace
}  // namespace larql
