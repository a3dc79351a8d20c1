// Each family's config switch does what its name says, shown on a small random checkpoint
// (`larql synth`) edited per family, with properties that can be checked by hand:
// mistral is llama; qwen2's q/k biases cannot change a one-position attention but its v
// bias does; qwen3's q/k norms make attention blind to the scale of q_proj; Llama 3
// rope_scaling leaves position 0 alone and moves the rest; an explicit head_dim that is
// not hidden/heads loads and runs, prefill equal to token by token.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "infer/local_ffn.h"
#include "infer/transformer.h"
#include "model/gguf_loader.h"
#include "model/loader.h"
#include "model/safetensors.h"
#include "model/synth.h"

namespace larql {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr size_t kHidden = 64, kHeads = 4, kKvHeads = 2, kLayers = 2;
const std::vector<int> kPrompt{3, 17, 42, 8, 25};

// A checkpoint in memory: config.json and f32 tensors, to edit and write back.
struct Checkpoint {
  json config;
  std::map<std::string, std::pair<std::vector<size_t>, std::vector<float>>> tensors;

  std::vector<float>& values(const std::string& name) { return tensors.at(name).second; }
  void add(const std::string& name, std::vector<size_t> shape, float fill) {
    size_t n = 1;
    for (size_t d : shape) n *= d;
    tensors[name] = {std::move(shape), std::vector<float>(n, fill)};
  }
  void scale(const std::string& name, float by) {
    for (float& v : values(name)) v *= by;
  }
  fs::path write(const std::string& tag) const {
    const fs::path dir = fs::temp_directory_path() / ("larql_family_" + tag + "_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    std::ofstream(dir / "config.json") << config.dump(2);
    std::vector<TensorToWrite> out;
    for (const auto& [name, t] : tensors) out.push_back({name, DType::f32, t.first, encode_tensor(DType::f32, t.second)});
    EXPECT_TRUE(write_safetensors((dir / "model.safetensors").string(), out).ok());
    return dir;
  }
};

std::string layer(size_t l, const std::string& rest) { return "model.layers." + std::to_string(l) + "." + rest; }

Checkpoint base_checkpoint() {
  const fs::path dir = fs::temp_directory_path() / ("larql_family_base_" + std::to_string(::getpid()));
  EXPECT_TRUE(write_synthetic_checkpoint(dir.string(), {.hidden = kHidden, .layers = kLayers, .ffn = 96, .heads = kHeads,
                                                        .kv_heads = kKvHeads, .vocab = 300, .context = 64,
                                                        .dtype = DType::f32, .seed = 11})
                  .ok());
  Checkpoint c;
  std::ifstream(dir / "config.json") >> c.config;
  auto file = read_safetensors((dir / "model.safetensors").string());
  EXPECT_TRUE(file.ok()) << (file.ok() ? "" : file.error().message);
  if (!file.ok()) return c;
  for (const auto& [name, t] : file->tensors) {
    std::vector<float> v(t.bytes / 4);
    std::memcpy(v.data(), t.data, t.bytes);
    c.tensors[name] = {t.shape, std::move(v)};
  }
  fs::remove_all(dir);
  return c;
}

// Logits after each prompt position, fed one token at a time.
std::vector<std::vector<float>> logits_of_model(const Model& model) {
  std::vector<std::vector<float>> out;
  ThreadPool pool(1);
  LocalFfn ffn(model, pool);
  Transformer t(model, ffn, pool);
  for (size_t p = 0; p < kPrompt.size(); ++p) {
    std::vector<float> logits;
    EXPECT_TRUE(t.forward({&kPrompt[p], 1}, p, logits).ok());
    out.push_back(logits);
  }
  return out;
}

std::vector<std::vector<float>> logits_per_position(const Checkpoint& c, const std::string& tag) {
  const fs::path dir = c.write(tag);
  auto model = load_model(dir.string());
  EXPECT_TRUE(model.ok()) << (model.ok() ? "" : model.error().message);
  std::vector<std::vector<float>> out;
  if (model.ok()) out = logits_of_model(*model);
  fs::remove_all(dir);
  return out;
}

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

class Families : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = base_checkpoint();
    ASSERT_FALSE(base_.tensors.empty());
  }
  Checkpoint base_;
};

TEST_F(Families, MistralIsLlama) {
  Checkpoint mistral = base_;
  mistral.config["model_type"] = "mistral";
  EXPECT_EQ(logits_per_position(mistral, "mistral"), logits_per_position(base_, "llama"));
}

TEST_F(Families, Qwen2BiasesOnQAndKCannotMoveOnePositionButOnVDo) {
  const auto llama = logits_per_position(base_, "llama");
  Checkpoint qwen2 = base_;
  qwen2.config["model_type"] = "qwen2";
  const size_t q = kHeads * (kHidden / kHeads), kv = kKvHeads * (kHidden / kHeads);
  for (size_t l = 0; l < kLayers; ++l) {
    qwen2.add(layer(l, "self_attn.q_proj.bias"), {q}, 0.0f);
    qwen2.add(layer(l, "self_attn.k_proj.bias"), {kv}, 0.0f);
    qwen2.add(layer(l, "self_attn.v_proj.bias"), {kv}, 0.0f);
  }
  EXPECT_EQ(logits_per_position(qwen2, "qwen2_zero"), llama);  // zero biases: adding 0 is exact

  Checkpoint qk = qwen2;
  for (size_t l = 0; l < kLayers; ++l) {
    qk.add(layer(l, "self_attn.q_proj.bias"), {q}, 0.5f);
    qk.add(layer(l, "self_attn.k_proj.bias"), {kv}, -0.75f);
  }
  const auto with_qk = logits_per_position(qk, "qwen2_qk");
  EXPECT_EQ(with_qk[0], llama[0]);  // one position: softmax of one score is 1, whatever the score
  EXPECT_GT(max_abs_diff(with_qk[1], llama[1]), 1e-4f);  // two positions: the scores decide

  Checkpoint v = qwen2;
  for (size_t l = 0; l < kLayers; ++l) v.add(layer(l, "self_attn.v_proj.bias"), {kv}, 0.5f);
  EXPECT_GT(max_abs_diff(logits_per_position(v, "qwen2_v")[0], llama[0]), 1e-4f);
}

TEST_F(Families, Qwen3QkNormsMakeAttentionBlindToTheScaleOfQ) {
  Checkpoint qwen3 = base_;
  qwen3.config["model_type"] = "qwen3";
  for (size_t l = 0; l < kLayers; ++l) {
    qwen3.add(layer(l, "self_attn.q_norm.weight"), {kHidden / kHeads}, 1.0f);
    qwen3.add(layer(l, "self_attn.k_norm.weight"), {kHidden / kHeads}, 1.0f);
  }
  Checkpoint qwen3_big_q = qwen3, llama_big_q = base_;
  for (size_t l = 0; l < kLayers; ++l) {
    qwen3_big_q.scale(layer(l, "self_attn.q_proj.weight"), 8.0f);
    llama_big_q.scale(layer(l, "self_attn.q_proj.weight"), 8.0f);
  }
  const auto normed = logits_per_position(qwen3, "qwen3"), normed_big = logits_per_position(qwen3_big_q, "qwen3_big");
  const auto llama = logits_per_position(base_, "llama"), llama_big = logits_per_position(llama_big_q, "llama_big");
  for (size_t p = 1; p < kPrompt.size(); ++p) {
    EXPECT_LT(max_abs_diff(normed[p], normed_big[p]), 1e-4f) << "position " << p;  // RMSNorm undoes the ×8
    EXPECT_GT(max_abs_diff(llama[p], llama_big[p]), 1e-3f) << "position " << p;    // without it, ×8 sharpens attention
  }
  EXPECT_GT(max_abs_diff(normed[1], llama[1]), 1e-4f);  // the norms are applied at all
}

TEST_F(Families, Llama3RopeScalingKeepsPositionZeroAndMovesTheRest) {
  Checkpoint scaled = base_;
  // head_dim 16 at θ = 10000: wavelengths 6.3, 20, 63, 200, … positions; with an original
  // context of 16, every one above 16 is stretched 8× and the one at 6.3 is interpolated.
  scaled.config["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0},
                                   {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 16}};
  const auto plain = logits_per_position(base_, "llama"), stretched = logits_per_position(scaled, "llama3");
  EXPECT_EQ(stretched[0], plain[0]);  // rotation by angle 0 whatever the frequency
  for (size_t p = 1; p < kPrompt.size(); ++p) EXPECT_GT(max_abs_diff(stretched[p], plain[p]), 1e-4f) << "position " << p;
}

TEST_F(Families, Qwen2AndQwen3AsF32GgufAreBitIdenticalToTheirCheckpoints) {
  // Their GGUF rows are not permuted (llama.cpp uses half-split RoPE for them), so with f32
  // weights the GGUF model is the same computation.
  const size_t q = kHeads * (kHidden / kHeads), kv = kKvHeads * (kHidden / kHeads);
  Checkpoint qwen2 = base_, qwen3 = base_;
  qwen2.config["model_type"] = "qwen2";
  qwen3.config["model_type"] = "qwen3";
  for (size_t l = 0; l < kLayers; ++l) {
    qwen2.add(layer(l, "self_attn.q_proj.bias"), {q}, 0.25f);
    qwen2.add(layer(l, "self_attn.k_proj.bias"), {kv}, -0.5f);
    qwen2.add(layer(l, "self_attn.v_proj.bias"), {kv}, 0.125f);
    qwen3.add(layer(l, "self_attn.q_norm.weight"), {kHidden / kHeads}, 1.5f);
    qwen3.add(layer(l, "self_attn.k_norm.weight"), {kHidden / kHeads}, 0.75f);
  }
  for (auto [checkpoint, tag] : {std::pair{&qwen2, "qwen2"}, {&qwen3, "qwen3"}}) {
    const fs::path dir = checkpoint->write(std::string(tag) + "_gguf");
    auto hf = load_model(dir.string());
    ASSERT_TRUE(hf.ok()) << hf.error().message;
    const std::string gguf_path = (dir / "model.gguf").string();
    auto written = export_gguf(*hf, gguf_path, {.scheme = *find_quant_scheme("f32"), .splits = 1});
    ASSERT_TRUE(written.ok()) << written.error().message;
    auto gguf = load_model(gguf_path);
    ASSERT_TRUE(gguf.ok()) << gguf.error().message;
    EXPECT_EQ(gguf->config.family, tag);
    EXPECT_EQ(gguf->config.rope_layout, RopeLayout::half_split);
    EXPECT_EQ(logits_of_model(*gguf), logits_of_model(*hf)) << tag;
    fs::remove_all(dir);
  }
}

TEST_F(Families, AnExplicitHeadDimOtherThanHiddenOverHeadsRuns) {
  Checkpoint narrow = base_;
  constexpr size_t kHeadDim = 8;  // hidden/heads would be 16
  narrow.config["head_dim"] = kHeadDim;
  for (size_t l = 0; l < kLayers; ++l) {
    narrow.add(layer(l, "self_attn.q_proj.weight"), {kHeads * kHeadDim, kHidden}, 0.0f);
    narrow.add(layer(l, "self_attn.k_proj.weight"), {kKvHeads * kHeadDim, kHidden}, 0.0f);
    narrow.add(layer(l, "self_attn.v_proj.weight"), {kKvHeads * kHeadDim, kHidden}, 0.0f);
    narrow.add(layer(l, "self_attn.o_proj.weight"), {kHidden, kHeads * kHeadDim}, 0.0f);
    for (const char* w : {"q_proj", "k_proj", "v_proj", "o_proj"}) {
      auto& v = narrow.values(layer(l, std::string("self_attn.") + w + ".weight"));
      for (size_t i = 0; i < v.size(); ++i) v[i] = 0.05f * std::sin(float(i * 7 + l));
    }
  }
  const fs::path dir = narrow.write("head_dim");
  auto model = load_model(dir.string());
  ASSERT_TRUE(model.ok()) << model.error().message;
  EXPECT_EQ(model->config.head_dim, kHeadDim);
  EXPECT_EQ(model->config.q_dim(), kHeads * kHeadDim);
  ThreadPool pool(1);
  LocalFfn ffn(*model, pool);
  std::vector<float> all_at_once, last;
  ASSERT_TRUE(Transformer(*model, ffn, pool).forward(kPrompt, 0, all_at_once).ok());
  const auto stepwise = logits_per_position(narrow, "head_dim_steps");
  EXPECT_EQ(all_at_once, stepwise.back());  // prefill equals token by token
  for (float v : all_at_once) ASSERT_TRUE(std::isfinite(v));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace larql
