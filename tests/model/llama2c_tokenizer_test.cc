// llama2.c tokenizer corner cases on a hand-made vocabulary: byte fallback for unknown
// code points, merge priority by score with ties to the left, BOS handling in decode.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <unordered_map>

#include "model/llama2c_tokenizer.h"
#include "support/best_time.h"

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

// run.c's encode as it is written: after the code points, rescan every adjacent pair for
// the best score (the leftmost of equals) and merge it, until none merges.
std::vector<int> run_c_encode(const std::vector<std::pair<std::string, float>>& extra, const std::string& text) {
  std::vector<std::string> pieces{"<unk>", "\n<s>\n", "\n</s>\n"};
  std::vector<float> scores(259, 0.0f);
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    pieces.push_back(buf);
  }
  for (const auto& [piece, score] : extra) pieces.push_back(piece), scores.push_back(score);
  std::unordered_map<std::string, int> ids;
  for (size_t i = 0; i < pieces.size(); ++i) ids.emplace(pieces[i], int(i));
  auto lookup = [&](const std::string& p) { auto it = ids.find(p); return it == ids.end() ? -1 : it->second; };
  std::vector<int> tokens{1};
  if (!text.empty() && lookup(" ") >= 0) tokens.push_back(lookup(" "));
  for (size_t i = 0; i < text.size();) {
    size_t len = 1;
    while (i + len < text.size() && (static_cast<unsigned char>(text[i + len]) & 0xC0) == 0x80 && len < 4) ++len;
    const std::string cp = text.substr(i, len);
    if (lookup(cp) >= 0) tokens.push_back(lookup(cp));
    else
      for (unsigned char b : cp) tokens.push_back(int(b) + 3);
    i += len;
  }
  for (;;) {
    float best = -1e10f;
    int best_id = -1;
    size_t at = 0;
    for (size_t i = 0; i + 1 < tokens.size(); ++i)
      if (const int id = lookup(pieces[size_t(tokens[i])] + pieces[size_t(tokens[i + 1])]); id >= 0 && scores[size_t(id)] > best)
        best = scores[size_t(id)], best_id = id, at = i;
    if (best_id < 0) return tokens;
    tokens[at] = best_id;
    tokens.erase(tokens.begin() + std::ptrdiff_t(at) + 1);
  }
}

TEST(Llama2cTokenizer, MergesAsRunCDoesOnRandomText) {
  // Pieces over a small alphabet with few distinct scores: many ties, merges that compete
  // for a symbol, and chains (a piece made of merged pieces).
  std::mt19937 rng(7);
  const std::vector<std::string> letters{" ", "a", "b", "c"};
  std::vector<std::pair<std::string, float>> extra;
  for (const auto& l : letters) extra.push_back({l, -1});
  for (const auto& x : letters)
    for (const auto& y : letters) {
      if (rng() % 3 != 0) extra.push_back({x + y, float(int(rng() % 4)) - 4});
      for (const auto& z : letters)
        if (rng() % 5 == 0) extra.push_back({x + y + z, float(int(rng() % 4)) - 4});
    }
  const auto path = write_vocab(extra);
  auto tok = Llama2cTokenizer::load(path);
  std::filesystem::remove(path);
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  const std::vector<std::string> alphabet{" ", "a", "b", "c", "é", "d"};
  for (int round = 0; round < 2000; ++round) {
    std::string text;
    for (size_t i = 0, n = rng() % 64; i < n; ++i) text += alphabet[rng() % alphabet.size()];
    ASSERT_EQ((*tok)->encode(text), run_c_encode(extra, text)) << "text '" << text << "'";
  }
}

// Sixteen times the text must take well under 64 times as long (run.c's rescan of every
// pair per merge: 256 times; 2.4 s for 20 KB). Best of five, same run.
TEST(Llama2cTokenizer, EncodingTimeGrowsLinearlyWithTheText) {
  const auto path = write_vocab({{" ", -1}, {"a", -1}, {"b", -1}, {"ab", -2}, {"ba", -1}, {" a", -3}, {"bab", -1}});
  auto tok = Llama2cTokenizer::load(path);
  std::filesystem::remove(path);
  ASSERT_TRUE(tok.ok());
  auto best_seconds = [&](size_t chars) {
    std::string text;
    for (size_t i = 0; text.size() < chars; ++i) text += i % 3 ? "ab " : "ba";
    return test::best_of_five_seconds([&] { EXPECT_GT((*tok)->encode(text).size(), 1u); });
  };
  const double small = best_seconds(4000), large = best_seconds(64000);
  EXPECT_LT(large, 64 * small) << "4000 chars " << small << " s, 64000 chars " << large << " s";
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
