// The demo model as GGUF files (written by export_gguf, as `larql quantize` does): BF16
// generates what the Hugging Face checkpoint generates; Q8_0 costs under 1% perplexity on
// the held-out chapters and keeps ≥ 99% teacher-forced top-1 agreement; a split file is
// the same model; two shard processes serving a Q8_0 GGUF give, over the f32 wire,
// exactly the logits of the local GGUF model.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "eval/perplexity.h"
#include "infer/local_ffn.h"
#include "infer/sampler.h"
#include "model/gguf_loader.h"
#include "model/loader.h"
#include "net/remote_ffn.h"
#include "support/demo_model.h"
#include "support/greedy.h"
#include "support/process.h"
#include "wire/wire_config.h"

namespace larql {
namespace {

namespace fs = std::filesystem;

class GgufDemo : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(fs::temp_directory_path() / ("larql_gguf_demo_" + std::to_string(::getpid())));
    fs::create_directories(*dir_);
    auto hf = load_model(test::kDemo);
    ASSERT_TRUE(hf.ok()) << hf.error().message;
    const std::string tokenizer = test::kDemo + "/tokenizer.json";
    for (auto [name, type, splits] : {std::tuple{"bf16.gguf", "bf16", 1}, {"q8_0.gguf", "q8_0", 1}, {"split.gguf", "q8_0", 3}}) {
      auto w = export_gguf(*hf, (*dir_ / name).string(), {*find_quant_scheme(type), tokenizer, size_t(splits)});
      ASSERT_TRUE(w.ok()) << w.error().message;
    }
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
  }
  static std::string path(const std::string& name) { return (*dir_ / name).string(); }
  static Model load(const std::string& p) {
    auto m = load_model(p);
    EXPECT_TRUE(m.ok()) << m.error().message;
    return m.ok() ? std::move(*m) : Model{};
  }

  static fs::path* dir_;
};
fs::path* GgufDemo::dir_ = nullptr;

TEST_F(GgufDemo, Bf16GeneratesWhatTheHuggingFaceCheckpointGenerates) {
  const Model hf = load(test::kDemo), gguf = load(path("bf16.gguf"));
  EXPECT_EQ(gguf.config.rope_layout, RopeLayout::adjacent_pairs);  // llama.cpp's permuted q/k rows
  auto hf_tok = load_tokenizer_for(hf, test::kDemo, std::nullopt);
  auto gguf_tok = load_tokenizer_for(gguf, path("bf16.gguf"), std::nullopt);
  ASSERT_TRUE(hf_tok.ok() && *hf_tok && gguf_tok.ok() && *gguf_tok);
  for (const std::string prompt : {"And the LORD said unto Moses,", "In the beginning", "Blessed are the"}) {
    const auto ids = (*hf_tok)->encode(prompt);
    ASSERT_EQ((*gguf_tok)->encode(prompt), ids) << prompt;
    ThreadPool pool(2);
    LocalFfn hf_ffn(hf, pool), gguf_ffn(gguf, pool);
    std::vector<std::vector<float>> a, b;
    const auto expected = test::greedy_with_logits(hf, hf_ffn, ids, 40, &a, 2);
    const auto got = test::greedy_with_logits(gguf, gguf_ffn, ids, 40, &b, 2);
    EXPECT_EQ(got, expected) << prompt;
    EXPECT_EQ((*gguf_tok)->decode(got), (*hf_tok)->decode(expected));
  }
}

TEST_F(GgufDemo, Q8_0KeepsPerplexityWithinOnePercentAndTop1Above99Percent) {
  const Model bf16 = load(path("bf16.gguf")), q8 = load(path("q8_0.gguf"));
  EXPECT_EQ(q8.layers[0].gate.dtype, DType::q8_0);
  auto tok = load_tokenizer_for(bf16, path("bf16.gguf"), std::nullopt);
  ASSERT_TRUE(tok.ok() && *tok);
  std::ifstream in(LARQL_SOURCE_DIR "/tests/data/kjv-heldout.txt");
  std::stringstream text;
  text << in.rdbuf();
  const auto tokens = (*tok)->encode(text.str());
  const PerplexityOptions options{.ctx = 256, .chunks = 8, .batch = 256, .bos = bf16.config.bos_id};
  ThreadPool pool(2);
  auto run = [&](const Model& m, std::vector<int>& top1) {
    LocalFfn ffn(m, pool);
    Transformer t(m, ffn, pool);
    auto e = perplexity(t, tokens, options, {}, [&](std::span<const float> logits, int) {
      top1.push_back(argmax(std::vector<float>(logits.begin(), logits.end())));
    });
    EXPECT_TRUE(e.ok()) << e.error().message;
    return e.ok() ? *e : PerplexityEstimate{};
  };
  std::vector<int> top_bf16, top_q8;
  const auto reference = run(bf16, top_bf16), quantised = run(q8, top_q8);
  ASSERT_EQ(top_bf16.size(), top_q8.size());
  ASSERT_GE(top_bf16.size(), 1000u);
  size_t agree = 0;
  for (size_t i = 0; i < top_bf16.size(); ++i) agree += top_bf16[i] == top_q8[i];
  const double agreement = double(agree) / double(top_bf16.size());
  std::printf("perplexity bf16 %.4f, q8_0 %.4f (%+.3f%%); top-1 agreement %.4f over %zu steps\n", reference.perplexity,
              quantised.perplexity, 100 * (quantised.perplexity / reference.perplexity - 1), agreement, top_bf16.size());
  EXPECT_LT(std::abs(quantised.perplexity / reference.perplexity - 1), 0.01);
  EXPECT_GE(agreement, 0.99);
}

TEST_F(GgufDemo, ASplitFileIsTheSameModel) {
  const Model whole = load(path("q8_0.gguf")), split = load(path("split-00001-of-00003.gguf"));
  EXPECT_EQ(split.files.size(), 3u);
  ThreadPool pool(1);
  LocalFfn a(whole, pool), b(split, pool);
  std::vector<std::vector<float>> la, lb;
  EXPECT_EQ(test::greedy_with_logits(split, b, {0, 297, 260}, 8, &lb), test::greedy_with_logits(whole, a, {0, 297, 260}, 8, &la));
  EXPECT_EQ(lb, la);
}

TEST_F(GgufDemo, TwoGgufShardsOverF32AreBitIdenticalToLocal) {
  const std::string file = path("q8_0.gguf");
  test::ChildProcess low({"serve", file, "--port", "0", "--layers", "0-2", "--threads", "1"});
  test::ChildProcess high({"serve", file, "--port", "0", "--layers", "3-5", "--threads", "1"});
  const Model m = load(file);
  auto wire = wire::client_wire("f32", [](const char*) -> const char* { return nullptr; });
  ASSERT_TRUE(wire.ok());
  const RemoteFfnOptions options{"0-2=" + low.url() + ",3-5=" + high.url(), *wire, {}, {}, 10000};
  std::vector<std::string> warnings;
  auto remote = RemoteFfn::connect(m, options, &warnings);
  EXPECT_TRUE(warnings.empty());
  ASSERT_TRUE(remote.ok()) << remote.error().message;
  ThreadPool pool(1);
  LocalFfn local(m, pool);
  std::vector<std::vector<float>> lr, ll;
  const std::vector<int> prompt{0, 297, 260, 342};
  EXPECT_EQ(test::greedy_with_logits(m, **remote, prompt, 12, &lr), test::greedy_with_logits(m, local, prompt, 12, &ll));
  EXPECT_EQ(lr, ll);  // bit for bit
}

}  // namespace
}  // namespace larql
