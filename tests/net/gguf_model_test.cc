// The demo model as GGUF files (written by export_gguf, as `larql quantize` does): BF16
// generates what the Hugging Face checkpoint generates; on the held-out chapters Q8_0
// costs under 1% perplexity and keeps ≥ 99% teacher-forced top-1 agreement, Q6_K under
// 1.5% and Q4_K_M under 5%; a split file is the same model; two shard processes serving a
// Q8_0 or a Q4_K_M GGUF give, over the f32 wire, exactly the logits of the local model.
#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

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
    for (auto [name, type, splits] : {std::tuple{"bf16.gguf", "bf16", 1}, {"q8_0.gguf", "q8_0", 1}, {"split.gguf", "q8_0", 3},
                                      {"q6_k.gguf", "q6_k", 1}, {"q4_k_m.gguf", "q4_k_m", 1}}) {
      auto w = export_gguf(*hf, (*dir_ / name).string(), {.scheme = *find_quant_scheme(type), .tokenizer_json = tokenizer, .splits = size_t(splits)});
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

// Perplexity on the held-out chapters (ctx 256, 8 chunks) and each step's top-1 id. Under
// the sanitizers the first 2 chunks: the same loaders and kernels checked for memory errors,
// where all 8 took a minute there (the sanitized net_tests' longest test).
#if defined(__SANITIZE_ADDRESS__)
constexpr size_t kHeldOutChunks = 2;
#else
constexpr size_t kHeldOutChunks = 8;
#endif
PerplexityEstimate held_out_perplexity(const Model& m, const Tokenizer& tok, std::vector<int>& top1) {
  std::ifstream in(LARQL_SOURCE_DIR "/tests/data/kjv-heldout.txt");
  std::stringstream text;
  text << in.rdbuf();
  const auto tokens = tok.encode(text.str());
  const PerplexityOptions options{.ctx = 256, .chunks = kHeldOutChunks, .batch = 256, .bos = m.config.bos_id};
  ThreadPool pool(2);
  LocalFfn ffn(m, pool);
  Transformer t(m, ffn, pool);
  auto e = perplexity(t, tokens, options, {}, [&](std::span<const float> logits, int) {
    top1.push_back(argmax(std::vector<float>(logits.begin(), logits.end())));
  });
  EXPECT_TRUE(e.ok()) << e.error().message;
  return e.ok() ? *e : PerplexityEstimate{};
}

TEST_F(GgufDemo, QuantisedFilesKeepPerplexityWithinTheirBounds) {
  const Model bf16 = load(path("bf16.gguf"));
  auto tok = load_tokenizer_for(bf16, path("bf16.gguf"), std::nullopt);
  ASSERT_TRUE(tok.ok() && *tok);
  std::vector<int> top_bf16;
  const auto reference = held_out_perplexity(bf16, **tok, top_bf16);
  ASSERT_GE(top_bf16.size(), 127 * kHeldOutChunks);  // the second half of each chunk is scored
  // file, the format its FFN matrices must be in, perplexity bound, top-1 agreement bound
  for (auto [file, ffn_type, bound, min_agreement] : {std::tuple{"q8_0.gguf", DType::q8_0, 0.01, 0.99},
                                                      {"q6_k.gguf", DType::q8_0, 0.015, 0.98},
                                                      {"q4_k_m.gguf", DType::q5_0, 0.05, 0.95}}) {
    const Model q = load(path(file));
    EXPECT_EQ(q.layers[0].gate.dtype, ffn_type) << file;  // rows of 384 values take the K-quants' fallbacks
    std::vector<int> top_q;
    const auto quantised = held_out_perplexity(q, **tok, top_q);
    ASSERT_EQ(top_q.size(), top_bf16.size());
    size_t agree = 0;
    for (size_t i = 0; i < top_q.size(); ++i) agree += top_q[i] == top_bf16[i];
    const double agreement = double(agree) / double(top_q.size()), change = quantised.perplexity / reference.perplexity - 1;
    std::printf("perplexity bf16 %.4f, %s %.4f (%+.3f%%); top-1 agreement %.4f over %zu steps\n", reference.perplexity, file,
                quantised.perplexity, 100 * change, agreement, top_q.size());
    EXPECT_LT(std::abs(change), bound) << file;
    EXPECT_GE(agreement, min_agreement) << file;
  }
  // The K-quants themselves are in the file where the rows allow them: ffn_down's 1024.
  const Model q4 = load(path("q4_k_m.gguf"));
  EXPECT_EQ(q4.layers[0].down.dtype, DType::q4_k);
  EXPECT_EQ(q4.layers[2].down.dtype, DType::q6_k);  // use_more_bits(2, 6)
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
  for (auto [name, arithmetic] : {std::pair{"q8_0.gguf", "f32"}, {"q4_k_m.gguf", "q8k"}}) {
    const std::string file = path(name);
    test::ChildProcess low({"serve", file, "--port", "0", "--layers", "0-2", "--threads", "1"});
    test::ChildProcess high({"serve", file, "--port", "0", "--layers", "3-5", "--threads", "1"});
    // The K-quant file's ranges name the super-block contract (kquant_dot.h); its down
    // matrices are K-quants, the rest fall back to 32-value formats.
    httplib::Client c(low.url());
    const auto stats = c.Get("/v1/stats");
    ASSERT_TRUE(stats && stats->status == 200);
    EXPECT_EQ(nlohmann::json::parse(stats->body)["ffn_arithmetic"], arithmetic) << name;
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
    EXPECT_EQ(test::greedy_with_logits(m, **remote, prompt, 12, &lr), test::greedy_with_logits(m, local, prompt, 12, &ll)) << name;
    EXPECT_EQ(lr, ll) << name;  // bit for bit
  }
  // A shard that computes the K-quant file's products another way (as a build from before
  // the super-block contract did, naming them "f32") is refused, not mixed in silently.
  test::ChildProcess other({"serve", path("q8_0.gguf"), "--port", "0", "--threads", "1"});
  auto wire = wire::client_wire("f32", [](const char*) -> const char* { return nullptr; });
  ASSERT_TRUE(wire.ok());
  const Model q4 = load(path("q4_k_m.gguf"));
  std::vector<std::string> warnings;
  auto refused = RemoteFfn::connect(q4, RemoteFfnOptions{"0-5=" + other.url(), *wire, {}, {}, 10000}, &warnings);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("computes the FFN with the f32 arithmetic, this client with q8k: the two builds compute "
                                         "K-quant weights differently"),
            std::string::npos)
      << refused.error().message;
}

}  // namespace
}  // namespace larql
