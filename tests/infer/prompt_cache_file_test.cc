// `larql run --prompt-cache` (infer/prompt_cache_file.h): a prompt's keys and values saved,
// loaded and continued give the tokens of a run without them, bit for bit; a file written
// for another model, another arithmetic, cut short, lengthened or hand-edited is refused
// with a message that names what differs, and nothing of it is loaded.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>

#include "infer/generate.h"
#include "infer/local_ffn.h"
#include "infer/prompt_cache_file.h"
#include "model/loader.h"
#include "model/synth.h"

namespace larql {
namespace {

namespace fs = std::filesystem;

class PromptCacheFile : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("larql_prompt_cache_" + std::to_string(::getpid()));
    for (uint64_t seed : {1, 2}) {
      const SynthSpec spec{.family = "llama", .hidden = 64, .layers = 2, .ffn = 128, .heads = 4, .kv_heads = 2, .head_dim = 16,
                           .vocab = 300, .context = 512, .dtype = DType::bf16, .seed = seed};
      ASSERT_TRUE(write_synthetic_checkpoint((dir_ / std::to_string(seed)).string(), spec).ok());
    }
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }
  static Model load(uint64_t seed) {
    auto m = load_model((dir_ / std::to_string(seed)).string());
    EXPECT_TRUE(m.ok()) << m.error().message;
    return std::move(*m);
  }
  // Greedy tokens after `prompt`, continuing `cached` of its positions from `from` (if given);
  // `after` sees the transformer at the end.
  static std::vector<int> greedy(const Model& model, const std::vector<int>& prompt, const PromptCache* from = nullptr,
                                 size_t cached = 0, const std::function<void(const Transformer&)>& after = {}) {
    ThreadPool pool(2);
    LocalFfn ffn(model, pool);
    Transformer t(model, ffn, pool);
    GenerateOptions options;
    options.max_new_tokens = 12;
    options.ignore_eos = true;
    if (from) {
      t.set_cache(copy_kv_prefix(model.config, from->cache, cached));
      options.cached = cached;
    }
    auto r = generate(t, prompt, options);
    EXPECT_TRUE(r.ok()) << r.error().message;
    if (after) after(t);
    return r.ok() ? r->generated : std::vector<int>{};
  }
  static std::vector<int> tokens(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<int> out(n);
    for (int& t : out) t = int(rng() % 280) + 10;
    return out;
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  static std::string bytes_of(const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
  static void write(const std::string& p, const std::string& bytes) { std::ofstream(p, std::ios::binary) << bytes; }
  static inline fs::path dir_;
};

TEST_F(PromptCacheFile, AContinuedPromptGivesTheTokensOfAFreshRun) {
  const Model model = load(1);
  const std::vector<int> first = tokens(70, 1);
  const std::string file = path("first.kv");
  greedy(model, first, nullptr, 0, [&](const Transformer& t) {
    ASSERT_TRUE(save_prompt_cache(file, model, first, t.cache()).ok());
  });
  auto loaded = load_prompt_cache(file, model);
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  EXPECT_EQ(loaded->tokens, first);
  // The same prompt (all but its last position from the file), and a longer one.
  EXPECT_EQ(greedy(model, first, &*loaded, first.size() - 1), greedy(model, first));
  std::vector<int> longer = first;
  const std::vector<int> more = tokens(20, 2);
  longer.insert(longer.end(), more.begin(), more.end());
  EXPECT_EQ(greedy(model, longer, &*loaded, first.size()), greedy(model, longer));
}

TEST_F(PromptCacheFile, AFileForAnotherModelOrArithmeticIsRefusedByName) {
  const Model model = load(1);
  const std::vector<int> prompt = tokens(20, 3);
  const std::string file = path("model1.kv");
  greedy(model, prompt, nullptr, 0, [&](const Transformer& t) { ASSERT_TRUE(save_prompt_cache(file, model, prompt, t.cache()).ok()); });
  const Model other = load(2);
  auto r = load_prompt_cache(file, other);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("written for another model"), std::string::npos) << r.error().message;
  Model bf16_dot = load(1);
  bf16_dot.use_arithmetic(Arithmetic::bf16_dot);
  r = load_prompt_cache(file, bf16_dot);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("arithmetic"), std::string::npos) << r.error().message;
}

TEST_F(PromptCacheFile, ATruncatedLengthenedOrHandEditedFileIsRefused) {
  const Model model = load(1);
  const std::vector<int> prompt = tokens(40, 4);
  const std::string file = path("edited.kv");
  greedy(model, prompt, nullptr, 0, [&](const Transformer& t) { ASSERT_TRUE(save_prompt_cache(file, model, prompt, t.cache()).ok()); });
  const std::string good = bytes_of(file);
  ASSERT_TRUE(load_prompt_cache(file, model).ok());
  auto refused_for = [&](const std::string& bytes, const std::string& why) {
    write(file, bytes);
    auto r = load_prompt_cache(file, model);
    EXPECT_FALSE(r.ok()) << why;
    if (!r.ok()) {
      EXPECT_NE(r.error().message.find(why), std::string::npos) << r.error().message;
    }
  };
  refused_for(good.substr(0, good.size() - 4), "truncated");
  refused_for(good + "xxxx", "bytes to spare");
  refused_for(good.substr(0, 10), "not a larql prompt cache");
  refused_for("NOTLARQL" + good.substr(8), "not a larql prompt cache");
  auto edited = [&](const std::string& from, const std::string& to) {
    std::string b = good;
    const size_t at = b.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return at == std::string::npos ? b : b.replace(at, from.size(), to);
  };
  // (Edits of the same length: the header's size stays right.)
  refused_for(edited("\"version\":1", "\"version\":7"), "version 7");
  refused_for(edited("\"kv_heads\":2", "\"kv_heads\":4"), "key-value heads");
  refused_for(edited("\"first\":0", "\"first\":9"), "first position");
  refused_for(edited("\"key_block\":16", "\"key_block\":32"), "keys in blocks");
  const std::string token = std::to_string(prompt[0]);
  refused_for(edited("\"tokens\":[" + token, "\"tokens\":[-" + std::string(token.size() - 1, '1')), "not an id of this vocabulary");
  refused_for(edited("{\"arithmetic\"", "[\"arithmetic\""), "header is not the JSON");
}

}  // namespace
}  // namespace larql
