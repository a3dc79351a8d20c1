// llama2.c tokenizer corner cases on a hand-made vocabulary: byte fallback for unknown
// code points, merge priority by score with ties to the left, BOS handling in decode.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "model/llama2c_tokenizer.h"

namespace larql {
namespace {

// Writes a tokenizer file: ids 0..2 specials, 3..258 byte pieces, then `extra` pieces.
std::string write_vocab(const std::vector<std::pair<std::string, float>>& extra) {
  const auto path = std::filesystem::temp_directory_path() / ("larql_tok_" + std::to_string(::getpid()) + ".bin");
  std::ofstream out(path, std::ios::binary);
  const int32_t max_len = 16;
  out.write(reinterpret_cast<const char*>(&max_len), 4);
  auto put = [&](const std::string& s, float score) {
    const int32_t len = int32_t(s.size());
    out.write(reinterpret_cast<const char*>(&score), 4);
    out.write(reinterpret_cast<const char*>(&len), 4);
    out.write(s.data(), len);
  };
  put("<unk>", 0);
  put("\n<s>\n", 0);
  put("\n</s>\n", 0);
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    put(buf, 0);
  }
  for (const auto& [s, score] : extra) put(s, score);
  return path.string();
}

TEST(Llama2cTokenizer, MergesByScoreAndFallsBackToBytes) {
  // ids: 259 " ", 260 "a", 261 "b", 262 "ab", 263 "ba", 264 " a"
  const auto path = write_vocab({{" ", -1}, {"a", -1}, {"b", -1}, {"ab", -2}, {"ba", -1}, {" a", -3}});
  auto tok = Llama2cTokenizer::load(path);
  std::filesystem::remove(path);
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  // "aba": "ba" (score -1) beats "ab" (-2); then " a" (-3) merges the prefix.
  EXPECT_EQ((*tok)->encode("aba"), (std::vector<int>{1, 264, 263}));
  // "é" is not in the vocabulary: its two UTF-8 bytes become byte tokens (byte + 3).
  EXPECT_EQ((*tok)->encode("é"), (std::vector<int>{1, 259, 0xC3 + 3, 0xA9 + 3}));
  // Empty text: BOS only, no prefix space.
  EXPECT_EQ((*tok)->encode(""), std::vector<int>{1});
  // Decode: the prefix space is dropped after BOS; byte tokens become bytes; control bytes vanish.
  EXPECT_EQ((*tok)->decode_step(1, 264), "a");
  EXPECT_EQ((*tok)->decode_step(260, 264), " a");
  EXPECT_EQ((*tok)->decode_step(260, 0x41 + 3), "A");
  EXPECT_EQ((*tok)->decode_step(260, 0x07 + 3), "");
  EXPECT_EQ((*tok)->decode_step(260, 0xC3 + 3) + (*tok)->decode_step(0xC3 + 3, 0xA9 + 3), "é");
}

TEST(Llama2cTokenizer, RejectsTruncatedFiles) {
  const auto path = write_vocab({{"abc", 0}});
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 2);
  auto tok = Llama2cTokenizer::load(path);
  std::filesystem::remove(path);
  ASSERT_FALSE(tok.ok());
  EXPECT_NE(tok.error().message.find("piece 259"), std::string::npos) << tok.error().message;
}

}  // namespace
}  // namespace larql
