#include "constrain/token_mask.h"

#include <algorithm>
#include <random>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "model/hf_tokenizer.h"
#include "support/js_tokenizers.h"

namespace larql {
namespace {

using ojson = nlohmann::ordered_json;

constexpr const char* kSchema = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "maxLength": 6},
    "tags": {"type": "array", "items": {"enum": ["a", "bb"]}},
    "n": {"type": "number"},
    "any": {}
  },
  "required": ["name", "n"]
})";

// The greedy path to a closed value by brute force: at each step every token fed to a copy,
// the fewest bytes left winning (ties: the longest, then the smallest bytes, then the id).
size_t brute_force_tokens_to_close(const TokenTrie& trie, JsonMatcher state, size_t limit, int* first) {
  *first = -1;
  for (size_t steps = 0; steps <= limit; ++steps) {
    if (state.closed()) return steps;
    if (steps == limit) break;
    int best = -1;
    size_t best_left = SIZE_MAX;
    JsonMatcher best_state = state;
    for (size_t id = 0; id < trie.vocab(); ++id) {
      const std::string& bytes = trie.bytes(int(id));
      JsonMatcher m = state;
      if (bytes.empty() || !m.feed(bytes)) continue;
      const size_t left = m.bytes_to_close();
      const std::string& b = best >= 0 ? trie.bytes(best) : bytes;
      if (best < 0 || left < best_left || (left == best_left && (bytes.size() > b.size() || (bytes.size() == b.size() && bytes < b))))
        best = int(id), best_left = left, best_state = m;
    }
    if (best < 0) break;
    if (steps == 0) *first = best;
    state = best_state;
  }
  return SIZE_MAX;
}

// The mask by brute force: every token fed to a copy of the state; where bytes say the
// value cannot close in time, also the greedy path's first token if that path fits.
std::vector<uint8_t> brute_force(const TokenTrie& trie, const JsonMatcher& state, size_t tokens_left) {
  std::vector<uint8_t> allowed(trie.vocab(), 0);
  for (size_t id = 0; id < trie.vocab(); ++id) {
    const std::string& bytes = trie.bytes(int(id));
    JsonMatcher m = state;
    if (!bytes.empty() && m.feed(bytes) && m.bytes_to_close() <= tokens_left) allowed[id] = 1;
  }
  int first = -1;
  if (state.bytes_to_close() > tokens_left && brute_force_tokens_to_close(trie, state, tokens_left + 1, &first) <= tokens_left + 1)
    allowed[size_t(first)] = 1;
  return allowed;
}

// The token_bytes of `ids`, joined (every one must have some).
std::string joined_token_bytes(const Tokenizer& tok, const std::vector<int>& ids) {
  std::string joined;
  for (int id : ids) {
    auto bytes = tok.token_bytes(id);
    EXPECT_TRUE(bytes) << "token " << id;
    joined += bytes.value_or("");
  }
  return joined;
}

// Walks `grammar` with random allowed tokens, checking the trie's mask against brute force
// at every step, with a budget that runs out so the forced closing is exercised too.
void check_walks(const TokenTrie& trie, const JsonGrammar& grammar, int walks, size_t budget) {
  std::mt19937 rng(11);
  std::vector<uint8_t> allowed;
  for (int walk = 0; walk < walks; ++walk) {
    JsonMatcher m(grammar);
    std::string text;
    for (size_t step = 0; step < budget && !m.closed(); ++step) {
      const size_t left = budget - step - 1;
      trie.allowed(m, left, allowed);
      ASSERT_EQ(allowed, brute_force(trie, m, left)) << "after " << text;
      std::vector<int> options;
      for (size_t id = 0; id < allowed.size(); ++id)
        if (allowed[id]) options.push_back(int(id));
      if (options.empty()) break;  // only the end can come (a complete number)
      const int pick = options[rng() % options.size()];
      ASSERT_TRUE(m.feed(trie.bytes(pick)));
      text += trie.bytes(pick);
    }
    EXPECT_TRUE(m.closed() || m.accepting()) << "the budget forced the value closed: " << text;
    EXPECT_FALSE(nlohmann::json::parse(text, nullptr, false).is_discarded()) << text;
  }
}

TEST(TokenTrie, MaskEqualsFeedingEveryTokenOnASyntheticVocabulary) {
  // Every single byte (as byte-level vocabularies have), and longer pieces around the
  // structure: quotes with text, keys, numbers, UTF-8 whole and split, escapes.
  std::vector<std::optional<std::string>> vocab;
  for (int b = 0; b < 256; ++b) vocab.push_back(std::string(1, char(b)));
  for (const char* piece : {"\"", "\":", "\",\"", "{\"", "name", "\"name\":\"", "tags", "\":[\"", "a\"", "bb\",\"",
                            "12", "-0.", "e+5", "true", "null", "}", "\"}", "]}", ", ", "\n  ", "hello", " world", "\\n",
                            "\\u00", "\xc3\xa9", "\xc3", "\xa9t", "\xe2\x82\xac", "\xf0\x9f", "\x98\x80", "ab\"", "x\\\""})
    vocab.push_back(std::string(piece));
  vocab.push_back(std::nullopt);  // a control token
  vocab.push_back(std::string());  // a token without text
  const TokenTrie trie(vocab);
  auto g = JsonGrammar::from_schema(ojson::parse(kSchema));
  ASSERT_TRUE(g) << g.error().message;
  check_walks(trie, **g, 40, 48);
  check_walks(trie, **g, 20, 20);  // tight: the close is forced early
  check_walks(trie, *JsonGrammar::any_object(), 40, 40);
}

// A budget in tokens, not bytes: with long pieces of the closing text in the vocabulary, a
// value whose bytes to close exceed the tokens left still closes, on the path the trie finds
// (the brute-force greedy's), and no sooner than that path allows.
TEST(TokenTrie, AValueClosesWithinItsTokensNotItsBytes) {
  std::vector<std::optional<std::string>> vocab;
  for (int b = 0; b < 256; ++b) vocab.push_back(std::string(1, char(b)));
  for (const char* piece : {"{\"name\":\"", "\",\"n\":", "0}", "\"}", "{\"", "name"}) vocab.push_back(std::string(piece));
  const TokenTrie trie(vocab);
  auto g = JsonGrammar::from_schema(ojson::parse(kSchema));
  ASSERT_TRUE(g);
  const JsonMatcher start(**g);
  int first = -1, brute_first = -1;
  const size_t tokens = trie.tokens_to_close(start, 100, &first);
  EXPECT_EQ(tokens, brute_force_tokens_to_close(trie, start, 100, &brute_first));
  EXPECT_EQ(first, brute_first);
  EXPECT_LT(tokens, start.bytes_to_close());  // 3 tokens for {"name":"","n":0}
  EXPECT_EQ(trie.tokens_to_close(start, tokens - 1), SIZE_MAX);
  // A budget of exactly that many tokens: every walk closes.
  check_walks(trie, **g, 20, tokens);
  std::vector<uint8_t> allowed;
  trie.allowed(start, tokens - 2, allowed);
  EXPECT_EQ(std::count(allowed.begin(), allowed.end(), 1), 0);  // one token short: nothing can start
}

TEST(TokenTrie, MaskEqualsFeedingEveryTokenOnTheDemoModelsVocabulary) {
  auto tok = HfTokenizer::load(std::string(LARQL_SOURCE_DIR) + "/models/demo/tokenizer.json");
  ASSERT_TRUE(tok) << tok.error().message;
  const TokenTrie trie = TokenTrie::of(**tok);
  ASSERT_EQ(trie.vocab(), (*tok)->vocab_size());
  auto g = JsonGrammar::from_schema(ojson::parse(kSchema));
  ASSERT_TRUE(g);
  check_walks(trie, **g, 8, 40);
}

TEST(TokenBytes, ConcatenatedTheyAreTheDecodedText) {
  auto tok = HfTokenizer::load(std::string(LARQL_SOURCE_DIR) + "/models/demo/tokenizer.json");
  ASSERT_TRUE(tok) << tok.error().message;
  const std::string text = "And God said, \"Let there be light\": and there was light \xc3\xa9\xe2\x82\xac.";
  const auto ids = (*tok)->encode_plain(text);
  EXPECT_EQ(joined_token_bytes(**tok, ids), (*tok)->decode(ids));
}

// SentencePiece-style files (▁ for spaces, <0xNN> byte tokens, a stripped leading space):
// token_bytes is each token's text mid-sentence, so the joined bytes are the decoded text
// with the space the decoder strips at a text's start, and a character the vocabulary
// lacks comes out as its UTF-8 bytes, one byte token each.
TEST(TokenBytes, SentencePieceFilesGiveEachTokensTextMidSentence) {
  for (const char* name : {"llama2", "gemma3"}) {
    const auto path = test::js_tokenizer_json(name);
    ASSERT_TRUE(std::filesystem::exists(path)) << path << " is missing: scripts/install-js-tokenizers.sh installs it";
    auto tok = HfTokenizer::load(path.string());
    ASSERT_TRUE(tok) << tok.error().message;
    const std::string text = "Hello \"world\": {x} caf\xc3\xa9 \xf0\x9f\xa6\x9c\xe2\x82\xac";
    const auto ids = (*tok)->encode_plain(text);
    const std::string joined = joined_token_bytes(**tok, ids);
    const std::string decoded = (*tok)->decode(ids);
    EXPECT_EQ(decoded, text) << name;
    EXPECT_TRUE(joined == decoded || joined == " " + decoded) << name << ": [" << joined << "]";
  }
}

// A vocabulary of the 256 bytes and one special token, "<|tool_call>", with no text of its own.
class MarkedVocabulary : public Tokenizer {
 public:
  size_t vocab_size() const override { return 257; }
  std::vector<int> encode(std::string_view) const override { return {}; }
  std::string piece(int id) const override { return id == 256 ? "<|tool_call>" : std::string(1, char(id)); }
  std::string decode(std::span<const int> ids) const override {
    std::string out;
    for (int id : ids) out += piece(id);
    return out;
  }
  std::optional<std::string> token_bytes(int id) const override {
    return id == 256 ? std::nullopt : std::optional<std::string>(std::string(1, char(id)));
  }
};

// A grammar of calls may write a chat format's marks as the special tokens a vocabulary
// holds them as: spelled by their vocabulary strings, they are allowed where the text is.
TEST(TokenTrie, SpecialTokensSpelledByTheirStringsAreAllowedWhereTheGrammarWritesThem) {
  const MarkedVocabulary vocabulary;
  auto g = JsonGrammar::tool_call({{"f", nullptr}}, "<|tool_call>call:", "", "<tool_call|>", ValueSyntax::gemma4);
  ASSERT_TRUE(g) << g.error().message;
  const TokenTrie plain = TokenTrie::of(vocabulary), spelled = TokenTrie::of(vocabulary, {"<|tool_call>"});
  EXPECT_EQ(plain.bytes(256), "");
  EXPECT_EQ(spelled.bytes(256), "<|tool_call>");
  std::vector<uint8_t> allowed;
  spelled.allowed(JsonMatcher(**g), 100, allowed);
  EXPECT_EQ(allowed[256], 1) << "the mark as one token";
  EXPECT_EQ(allowed['<'], 1) << "or spelled out byte by byte";
  EXPECT_EQ(allowed['c'], 0);
  plain.allowed(JsonMatcher(**g), 100, allowed);
  EXPECT_EQ(allowed[256], 0) << "a special token without text is never allowed unless spelled";
  JsonMatcher inside(**g);
  ASSERT_TRUE(inside.feed("<|tool_call>call:f{"));
  spelled.allowed(inside, 100, allowed);
  EXPECT_EQ(allowed[256], 0) << "not where the grammar does not write the mark";
}

}  // namespace
}  // namespace larql
