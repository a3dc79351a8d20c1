// GPT-OSS (tests/data/moe/gptoss*, written by `larql synth --family gpt-oss`) against the
// PyTorch reference that follows transformers' modeling_gpt_oss.py (tools/gpt_oss_reference.py):
// attention sinks and biases, alternating sliding and full layers, YaRN RoPE, the router's
// bias and top-k softmax, experts with biases and the clamped SwiGLU; f32 experts within
// 1e-5 of the logit range, MXFP4 experts (whose products round activations to 8 bits) by
// greedy ids and each position's top token. Also the two MXFP4 layouts and bad input.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "infer/moe_routing.h"
#include "kernels/block_formats.h"
#include "model/gpt_oss_experts.h"
#include "model/gguf.h"
#include "model/gguf_loader.h"
#include "model/loader.h"
#include "model/quant_schemes.h"
#include "support/reference_fixtures.h"

namespace larql {
namespace {

namespace fs = std::filesystem;

TEST(GptOss, HuggingFaceCheckpointMatchesThePyTorchReference) {
  auto model = load_model(test::moe_fixture("gptoss").string());
  ASSERT_TRUE(model.ok()) << model.error().message;
  const ModelConfig& c = model->config;
  EXPECT_EQ(c.family, "gpt_oss");
  EXPECT_TRUE(c.attention_sinks && c.attention_bias);
  EXPECT_EQ(c.activation, Activation::swiglu_clamped);
  EXPECT_EQ(c.swiglu_limit, 7.0f);
  EXPECT_EQ(c.moe.weights, RouterWeights::top_k_softmax);
  for (size_t l = 0; l < c.layers; ++l) {
    EXPECT_EQ(c.layer(l).attention, l % 2 == 0 ? AttentionKind::sliding : AttentionKind::full) << l;
    ASSERT_TRUE(c.layer(l).rope.yarn.has_value());
    EXPECT_FALSE(c.layer(l).rope.yarn->truncate);
    const LayerWeights& w = model->layers[l];
    EXPECT_TRUE(w.sinks.data && w.bo.data && w.router_bias.data) << l;
    ASSERT_EQ(w.experts.size(), c.moe.experts);
    EXPECT_TRUE(w.experts[0].gate_bias.data && w.experts[0].up_bias.data && w.experts[0].down_bias.data);
  }
  const auto ref = test::reference_output(test::moe_fixture("gptoss"));
  test::expect_matches_reference(*model, ref, "gpt-oss HF", 1e-5);
  EXPECT_EQ(test::all_logits(*model, ref.tokens, true), test::all_logits(*model, ref.tokens, false));
}

// The f32 fixture as llama.cpp's converter lays GPT-OSS out (arch gpt-oss, post_attention_norm,
// attn_sinks, biases, YaRN keys), then as `quantize --type mxfp4_moe` writes it.
TEST(GptOss, GgufOfTheSameWeightsMatchesThePyTorchReference) {
  auto hf = load_model(test::moe_fixture("gptoss").string());
  ASSERT_TRUE(hf.ok()) << hf.error().message;
  const auto ref = test::reference_output(test::moe_fixture("gptoss"));
  const fs::path dir = fs::temp_directory_path() / ("larql_gptoss_gguf_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  for (const char* scheme : {"f32", "mxfp4_moe"}) {
    SCOPED_TRACE(scheme);
    const fs::path path = dir / (std::string(scheme) + ".gguf");
    ASSERT_TRUE(export_gguf(*hf, path.string(), {.scheme = *find_quant_scheme(scheme), .splits = 1}).ok());
    auto file = read_gguf(path.string());
    ASSERT_TRUE(file.ok()) << file.error().message;
    EXPECT_EQ(file->find("general.architecture")->text, "gpt-oss");
    EXPECT_EQ(file->find("gpt-oss.rope.scaling.type")->text, "yarn");
    EXPECT_EQ(file->integer_or("gpt-oss.rope.scaling.original_context_length", 0), 4096);
    EXPECT_EQ(file->integer_or("gpt-oss.attention.sliding_window", 0), 4);
    for (const char* name : {"blk.0.post_attention_norm.weight", "blk.0.attn_sinks.weight", "blk.0.attn_output.bias",
                             "blk.0.ffn_gate_inp.bias", "blk.0.ffn_gate_exps.bias", "blk.0.ffn_up_exps.bias", "blk.0.ffn_down_exps.bias"})
      EXPECT_EQ(file->tensors.count(name), 1u) << name;
    EXPECT_EQ(file->tensors.count("blk.0.ffn_norm.weight"), 0u);
    EXPECT_EQ(file->tensors.at("blk.0.ffn_gate_inp.weight").ggml_type, 0u) << "the router stays f32";
    EXPECT_EQ(file->tensors.at("blk.0.ffn_up_exps.bias").ggml_type, 0u) << "biases stay f32";
    auto gguf = load_model(path.string());
    ASSERT_TRUE(gguf.ok()) << gguf.error().message;
    EXPECT_EQ(gguf->config.family, "gpt_oss");
    EXPECT_EQ(gguf->config.moe.weights, RouterWeights::top_k_softmax);
    ASSERT_TRUE(gguf->config.layer(0).rope.yarn.has_value());
    EXPECT_FALSE(gguf->config.layer(0).rope.yarn->truncate) << "transformers' ramp for GPT-OSS";
    if (std::string(scheme) == "f32") {
      test::expect_matches_reference(*gguf, ref, "gpt-oss GGUF", 1e-5);
      continue;
    }
    // llama.cpp's mxfp4_moe: 3-D experts MXFP4, the other 2-D weights Q8_0.
    EXPECT_EQ(gguf->layers[0].experts[0].gate.dtype, DType::mxfp4);
    EXPECT_EQ(gguf->layers[2].experts[3].down.dtype, DType::mxfp4);
    EXPECT_EQ(gguf->layers[0].wq.dtype, DType::q8_0);
    EXPECT_EQ(gguf->classifier.dtype, DType::q8_0);
    EXPECT_EQ(gguf->embed.dtype, DType::q8_0);
    // Random f32 experts rounded to four bits move a random model's near-flat logits: held
    // to the error of the same weights in Q4_0 (its 4-bit integers), measured alike.
    const double error = test::expect_logits_match(ref.logits, test::all_logits(*gguf, ref.tokens, true), "mxfp4_moe", 1.0);
    const fs::path q4 = dir / "q4_0.gguf";
    ASSERT_TRUE(export_gguf(*hf, q4.string(), {.scheme = *find_quant_scheme("q4_0"), .splits = 1}).ok());
    auto q4_model = load_model(q4.string());
    ASSERT_TRUE(q4_model.ok());
    const double q4_error = test::expect_logits_match(ref.logits, test::all_logits(*q4_model, ref.tokens, true), "q4_0", 1.0);
    std::printf("gpt-oss mxfp4_moe: max |logit - reference| / range %.3f; q4_0 %.3f\n", error, q4_error);
    EXPECT_LE(error, 2 * q4_error);
  }
  fs::remove_all(dir);
}

// MXFP4 values survive GGML's quantiser exactly (every code times a power of two is one), so
// an MXFP4 checkpoint written as mxfp4_moe keeps its experts value for value.
TEST(GptOss, Mxfp4ExpertsKeepTheirValuesThroughMxfp4Moe) {
  auto hf = load_model(test::moe_fixture("gptoss-mxfp4").string());
  ASSERT_TRUE(hf.ok()) << hf.error().message;
  const fs::path path = fs::temp_directory_path() / ("larql_gptoss_mxfp4_" + std::to_string(::getpid()) + ".gguf");
  ASSERT_TRUE(export_gguf(*hf, path.string(), {.scheme = *find_quant_scheme("mxfp4_moe"), .splits = 1}).ok());
  auto gguf = load_model(path.string());
  ASSERT_TRUE(gguf.ok()) << gguf.error().message;
  for (size_t l = 0; l < hf->config.layers; ++l)
    for (size_t e = 0; e < hf->config.moe.experts; ++e)
      for (auto member : {&ExpertWeights::gate, &ExpertWeights::up, &ExpertWeights::down}) {
        const Matrix &a = hf->layers[l].experts[e].*member, &b = gguf->layers[l].experts[e].*member;
        ASSERT_EQ(b.dtype, DType::mxfp4);
        std::vector<float> x(a.cols), y(b.cols);
        for (size_t r = 0; r < a.rows; ++r) {
          dequantize_row(a.dtype, a.row_ptr(r), a.cols, x.data());
          dequantize_row(b.dtype, b.row_ptr(r), b.cols, y.data());
          ASSERT_EQ(x, y) << "layer " << l << " expert " << e << " row " << r;
        }
      }
  fs::remove(path);
}

// transformers' MXFP4 layout repacked at load into GGML's blocks: the same values as the
// reference's dequantisation, the model's greedy ids, and each position's top token.
TEST(GptOss, Mxfp4ExpertsFromHuggingFaceKeepTheReferencesTokens) {
  auto model = load_model(test::moe_fixture("gptoss-mxfp4").string());
  ASSERT_TRUE(model.ok()) << model.error().message;
  const LayerWeights& w = model->layers[0];
  EXPECT_EQ(w.experts[0].gate.dtype, DType::mxfp4);
  EXPECT_EQ(w.experts[0].down.dtype, DType::mxfp4);
  EXPECT_EQ(w.wq.dtype, DType::bf16) << "what is not an expert stays BF16";
  const auto ref = test::reference_output(test::moe_fixture("gptoss-mxfp4"));
  EXPECT_EQ(test::local_greedy(*model, ref.tokens, ref.greedy.size()), ref.greedy);
  const auto logits = test::all_logits(*model, ref.tokens, true);
  double worst = 0;
  for (size_t p = 0; p < ref.tokens.size(); ++p) {
    const auto top = [](const std::vector<float>& v) { return std::max_element(v.begin(), v.end()) - v.begin(); };
    EXPECT_EQ(top(logits[p]), top(ref.logits[p])) << "position " << p;
    const auto [lo, hi] = std::minmax_element(ref.logits[p].begin(), ref.logits[p].end());
    for (size_t i = 0; i < logits[p].size(); ++i) worst = std::max(worst, std::fabs(double(logits[p][i]) - ref.logits[p][i]) / (*hi - *lo));
  }
  std::printf("gpt-oss MXFP4: max |logit - reference| / logit range = %.2e (activations rounded to 8 bits)\n", worst);
  EXPECT_LT(worst, 0.05);
}

TEST(GptOss, Mxfp4BlocksRepackBetweenTheTwoLayoutsExactly) {
  // Every code in every place: transformers' byte k holds values 2k and 2k+1; GGML's byte j
  // holds j and j + 16.
  uint8_t hf[16], ggml[17], back[16], scale = 0;
  for (int seed = 0; seed < 16; ++seed) {
    for (int k = 0; k < 16; ++k) hf[k] = uint8_t((k * 7 + seed) % 16 | ((k * 5 + 3 * seed) % 16) << 4);
    mxfp4_block_from_hf(hf, uint8_t(120 + seed), ggml);
    EXPECT_EQ(ggml[0], 120 + seed);
    for (size_t v = 0; v < 32; ++v) {
      const int hf_code = (hf[v / 2] >> (4 * (v % 2))) & 0x0F;
      EXPECT_EQ(load_as_f32(DType::mxfp4, ggml, v), std::ldexp(float(blocks::kMxfp4Values[hf_code]), 120 + seed - 128)) << v;
    }
    mxfp4_block_to_hf(ggml, back, &scale);
    EXPECT_EQ(std::vector<uint8_t>(back, back + 16), std::vector<uint8_t>(hf, hf + 16));
    EXPECT_EQ(scale, 120 + seed);
  }
}

// A copy of the MXFP4 fixture with one changed byte or shape: a clear error, no abort.
class GptOssBadInput : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("larql_gptoss_bad_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::copy(test::moe_fixture("gptoss-mxfp4"), dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  // Overwrites the first byte of `tensor`'s data in model.safetensors.
  void poke_first_byte(const std::string& tensor, uint8_t value) {
    const fs::path file = dir_ / "model.safetensors";
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    uint64_t header_len = 0;
    f.read(reinterpret_cast<char*>(&header_len), 8);
    std::string header(header_len, '\0');
    f.read(header.data(), std::streamsize(header_len));
    const auto j = nlohmann::json::parse(header);
    const size_t begin = j.at(tensor).at("data_offsets")[0].get<size_t>();
    f.seekp(std::streamoff(8 + header_len + begin));
    f.put(char(value));
  }
  fs::path dir_;
};

TEST_F(GptOssBadInput, AScaleByteOf0xFFIsRefusedNamingItsPlace) {
  poke_first_byte("model.layers.1.mlp.experts.down_proj_scales", 0xFF);
  auto model = load_model(dir_.string());
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.error().message.find("model.layers.1.mlp.experts.down_proj_scales"), std::string::npos) << model.error().message;
  EXPECT_NE(model.error().message.find("0xFF"), std::string::npos) << model.error().message;
  EXPECT_NE(model.error().message.find("expert 0, row 0, block 0"), std::string::npos) << model.error().message;
}

// A GGUF whose MXFP4 expert tensor has rows its 32-value blocks do not divide, or a
// shape that disagrees with the config: refused naming the tensor, never read past.
TEST(GptOssGgufBadInput, Mxfp4TensorsOfTheWrongShapeAreNamed) {
  auto hf = load_model(test::moe_fixture("gptoss-mxfp4").string());
  ASSERT_TRUE(hf.ok()) << hf.error().message;
  const fs::path dir = fs::temp_directory_path() / ("larql_gptoss_badgguf_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path good = dir / "good.gguf";
  ASSERT_TRUE(export_gguf(*hf, good.string(), {.scheme = *find_quant_scheme("mxfp4_moe"), .splits = 1}).ok());
  auto file = read_gguf(good.string());
  ASSERT_TRUE(file.ok());
  const std::string name = "blk.1.ffn_up_exps.weight";
  for (const auto& [shape, expected] : std::vector<std::pair<std::vector<size_t>, std::string>>{
           {{4, 128, 48}, "not a multiple of its 32-value blocks"},  // same bytes: 4 · 128 · 48/32 · 17 = 4 · 64 · 64/32 · 17 · 1.5
           {{4, 96, 64}, "expected [4, 64, 64]"}}) {
    std::vector<GgufTensorToWrite> tensors;
    for (const auto& [n, t] : file->tensors) {
      GgufTensorToWrite w{n, *t.dtype, t.shape, std::vector<uint8_t>(t.data, t.data + t.bytes)};
      if (n == name) {
        w.shape = shape;
        w.bytes.assign(shape[0] * shape[1] * (shape[2] + 31) / 32 * 17, 0x11);
      }
      tensors.push_back(std::move(w));
    }
    const fs::path bad = dir / "bad.gguf";
    auto written = write_gguf(bad.string(), file->metadata, tensors);
    if (!written.ok()) {  // the writer refuses rows of partial blocks itself
      EXPECT_NE(written.error().message.find(name), std::string::npos) << written.error().message;
      continue;
    }
    auto model = load_model(bad.string());
    ASSERT_FALSE(model.ok()) << "shape " << shape[2];
    EXPECT_NE(model.error().message.find(name), std::string::npos) << model.error().message;
    EXPECT_NE(model.error().message.find(expected), std::string::npos) << model.error().message;
  }
  fs::remove_all(dir);
}

TEST_F(GptOssBadInput, BlocksThatDoNotMatchTheShapeAreNamed) {
  // The config's expert width no longer matches the stored blocks.
  std::ifstream in(dir_ / "config.json");
  auto config = nlohmann::json::parse(in);
  in.close();
  config["intermediate_size"] = 96;
  std::ofstream(dir_ / "config.json") << config.dump();
  auto model = load_model(dir_.string());
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.error().message.find("gate_up_proj_blocks"), std::string::npos) << model.error().message;
  EXPECT_NE(model.error().message.find("expected U8 [4, 192, 2, 16]"), std::string::npos) << model.error().message;
}

}  // namespace
}  // namespace larql
