// Hand-made tokenizer.json files for the corner cases: merge priority (rank, not length;
// leftmost on ties), both merge formats, special tokens found in raw text, byte fallback,
// and a stream that reassembles a character split over byte tokens.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "model/hf_tokenizer.h"
#include "support/best_time.h"

namespace larql {
namespace {

using nlohmann::json;

std::unique_ptr<HfTokenizer> load_from(const json& doc) {
  const auto path = std::filesystem::temp_directory_path() / ("larql_tokjson_" + std::to_string(::getpid()) + ".json");
  std::ofstream(path) << doc.dump();
  auto tok = HfTokenizer::load(path.string());
  std::filesystem::remove(path);
  EXPECT_TRUE(tok.ok()) << (tok.ok() ? "" : tok.error().message);
  return tok.ok() ? std::move(*tok) : nullptr;
}

// SentencePiece-style: ▁ for spaces, byte fallback, <s> template.
json sentencepiece_style(json merges) {
  json vocab = {{"<unk>", 0}, {"<s>", 1}, {"</s>", 2}};
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    vocab[name] = 3 + b;
  }
  int id = 259;
  for (const char* t : {"\u2581", "a", "b", "c", "ab", "bc", "abc", "\u2581a", "\u2581ab"}) vocab[t] = id++;
  return {{"added_tokens", {{{"id", 1}, {"content", "<s>"}, {"special", true}}, {{"id", 2}, {"content", "</s>"}, {"special", true}}}},
          {"normalizer", {{"type", "Sequence"}, {"normalizers", {{{"type", "Prepend"}, {"prepend", "\u2581"}},
                                                                 {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\u2581"}}}}}},
          {"pre_tokenizer", nullptr},
          {"post_processor", {{"type", "TemplateProcessing"},
                              {"single", {{{"SpecialToken", {{"id", "<s>"}}}}, {{"Sequence", {{"id", "A"}}}}}},
                              {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {1}}}}}}}},
          {"decoder", {{"type", "Sequence"}, {"decoders", {{{"type", "Replace"}, {"pattern", {{"String", "\u2581"}}}, {"content", " "}},
                                                           {{"type", "ByteFallback"}}, {{"type", "Fuse"}},
                                                           {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}}},
          {"model", {{"type", "BPE"}, {"unk_token", "<unk>"}, {"byte_fallback", true}, {"fuse_unk", true},
                     {"vocab", vocab}, {"merges", merges}}}};
}

TEST(HfTokenizer, MergePriorityIsByRankAndLeftmost) {
  // "b c" ranks before "a b": "abc" → a + bc (no "a bc" merge) even though "ab" exists.
  auto tok = load_from(sentencepiece_style({"b c", "a b", "ab c", "\u2581 a"}));
  ASSERT_TRUE(tok);
  // "▁abc": b c (rank 0) first, so "a b" never applies; then ▁ a (rank 3) → ▁a bc.
  EXPECT_EQ(tok->encode_plain("abc"), (std::vector<int>{266, 264}));
  // Array form of merges gives the same.
  auto tok2 = load_from(sentencepiece_style(json::array({json::array({"b", "c"}), json::array({"a", "b"}),
                                                         json::array({"ab", "c"}), json::array({"\u2581", "a"})})));
  ASSERT_TRUE(tok2);
  EXPECT_EQ(tok2->encode_plain("abc"), tok->encode_plain("abc"));
  // With only "a b": "ab" → ▁ ab.
  auto tok3 = load_from(sentencepiece_style({"a b"}));
  EXPECT_EQ(tok3->encode_plain("ab"), (std::vector<int>{259, 263}));
}

TEST(HfTokenizer, SpecialTokensTemplateAndByteFallback) {
  auto tok = load_from(sentencepiece_style({"a b", "\u2581 ab"}));
  ASSERT_TRUE(tok);
  // Template adds <s>; "é" is not in the vocabulary: its UTF-8 bytes become <0xC3><0xA9>.
  EXPECT_EQ(tok->encode("ab é"), (std::vector<int>{1, 267, 259, 3 + 0xC3, 3 + 0xA9}));
  // Special tokens are matched in the raw text.
  EXPECT_EQ(tok->encode_plain("ab</s>ab"), (std::vector<int>{267, 2, 267}));
  // Unknown characters without byte tokens fuse into one <unk>... here bytes exist, so none appear.
  EXPECT_EQ(tok->decode(tok->encode_plain("ab é")), "ab é");
}

// Added tokens are looked for at every byte of the text: six thousand of them (Gemma's
// files list thousands) must cost about what six do. The scan that tried each one took 61
// times as long (docs/benchmarks/history.md). Best of five, same run.
TEST(HfTokenizer, ThousandsOfAddedTokensCostAboutWhatAFewDo) {
  auto with_added = [](int count) {
    json doc = sentencepiece_style({"a b", "\u2581 ab"});
    for (int i = 0; i < count; ++i)
      doc["added_tokens"].push_back({{"id", 300 + i}, {"content", "<unused" + std::to_string(i) + ">"}, {"special", true}});
    return load_from(doc);
  };
  const auto few = with_added(6), many = with_added(6000);
  ASSERT_TRUE(few && many);
  std::string text;
  while (text.size() < 40000) text += "ab c </s>abc <unused12> ";
  auto best_seconds = [&](const HfTokenizer& tok) {
    return test::best_of_five_seconds([&] { EXPECT_GT(tok.encode(text).size(), 1000u); });
  };

  const double a = best_seconds(*few), b = best_seconds(*many);
  EXPECT_LT(b, 4 * a) << "6 added tokens " << a << " s, 6000 " << b << " s";
  EXPECT_NE(many->encode("x<unused12>y"), few->encode("x<unused12>y")) << "the added token is found";
}

TEST(HfTokenizer, StreamReassemblesCharactersSplitOverByteTokens) {
  auto tok = load_from(sentencepiece_style({"a b", "\u2581 ab"}));
  ASSERT_TRUE(tok);
  std::string long_text;
  for (int i = 0; i < 12; ++i) long_text += "ab é€ a";  // long enough for the window to restart
  const std::vector<int> ids = tok->encode_plain(long_text);
  TextStream stream(*tok, 1);
  std::string text;
  std::vector<std::string> pieces;
  for (int id : ids) {
    pieces.push_back(stream.push(id));
    text += pieces.back();
  }
  text += stream.finish();
  EXPECT_EQ(text, " " + long_text);  // the stream starts mid-text: the first space is kept
  for (const auto& p : pieces) EXPECT_EQ(p.find("\xEF\xBF\xBD"), std::string::npos) << "a partial character leaked";
}

TEST(HfTokenizer, UnsupportedPartsAreNamed) {
  json doc = sentencepiece_style(json::array());
  doc["pre_tokenizer"] = {{"type", "BertPreTokenizer"}};
  const auto path = std::filesystem::temp_directory_path() / ("larql_tokjson_bad_" + std::to_string(::getpid()) + ".json");
  std::ofstream(path) << doc.dump();
  auto tok = HfTokenizer::load(path.string());
  std::filesystem::remove(path);
  ASSERT_FALSE(tok.ok());
  EXPECT_NE(tok.error().message.find("pre_tokenizer 'BertPreTokenizer' is not supported"), std::string::npos);
}

// Files the fuzzer (fuzz/fuzz_tokenizer_json.cc) turned up: each is a clear error, never a
// crash, an exception or a gigabyte allocation.
TEST(HfTokenizer, MalformedFilesAreErrorsNamingThePart) {
  auto error_of = [](const json& doc) {
    const auto path = std::filesystem::temp_directory_path() / ("larql_tokjson_fz_" + std::to_string(::getpid()) + ".json");
    std::ofstream(path) << doc.dump();
    auto tok = HfTokenizer::load(path.string());
    std::filesystem::remove(path);
    return tok.ok() ? std::string("loaded") : tok.error().message;
  };
  json huge_id = sentencepiece_style(json::array());
  huge_id["model"]["vocab"]["ab"] = 522222222222222222ull;
  EXPECT_NE(error_of(huge_id).find("vocab id of 'ab' is not a number from 0 to 4194303"), std::string::npos) << error_of(huge_id);
  json no_list = sentencepiece_style(json::array());
  no_list["normalizer"].erase("normalizers");
  EXPECT_NE(error_of(no_list).find("a Sequence lacks its 'normalizers' array"), std::string::npos) << error_of(no_list);
  json wrong_type = sentencepiece_style(json::array());
  wrong_type["added_tokens"][0]["content"] = 7;
  EXPECT_NE(error_of(wrong_type).find("has a field of the wrong type"), std::string::npos) << error_of(wrong_type);
  json outside = sentencepiece_style(json::array());
  outside["post_processor"]["special_tokens"]["<s>"]["ids"] = {100000};
  EXPECT_NE(error_of(outside).find("post_processor special token '<s>' has id 100000, outside the vocabulary of 268"),
            std::string::npos)
      << error_of(outside);
}

}  // namespace
}  // namespace larql
