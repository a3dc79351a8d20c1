#include "model/gguf_tokenizer.h"

#include <algorithm>
#include <unordered_map>

#include "model/hf_tokenizer.h"
#include "model/utf8.h"

namespace larql {
namespace {

using nlohmann::json;

// llama.cpp's token types (llama_token_type).
enum TokenType { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

const std::string kMetaspace = "\xE2\x96\x81";  // ▁

// tokenizer.ggml.pre values larql reads, and the tokenizer.json pieces they stand for.
struct PreTokenizer {
  std::string_view gguf_name;
  std::string_view regex;  // empty: ByteLevel's own GPT-2 regex
  bool ignore_merges;      // whole words found in the vocabulary are not merged (Llama 3)
  bool nfc;                // Qwen 2's tokenizer.json normalises to NFC first
};

constexpr PreTokenizer kPreTokenizers[] = {
    {"gpt-2", "", false, false},
    {"llama-bpe",
     R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
     true, false},
    {"qwen2",
     R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
     false, true},
    // o200k (GPT-OSS's o200k_harmony): tiktoken's pattern; whole pieces in the vocabulary are
    // taken as they are, as tiktoken does.
    {"gpt-4o",
     R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
     true, false},
};

const PreTokenizer* find_pre(std::string_view name) {
  if (name == "default") name = "gpt-2";
  for (const auto& p : kPreTokenizers)
    if (p.gguf_name == name) return &p;
  return nullptr;
}

Error bad(const std::string& source, const std::string& what) { return make_error(ErrorCode::invalid_argument, source + ": " + what); }

json template_processing(const std::vector<std::pair<std::string, int>>& before, const std::vector<std::pair<std::string, int>>& after) {
  json single = json::array(), specials = json::object();
  auto add = [&](const std::pair<std::string, int>& t) {
    single.push_back({{"SpecialToken", {{"id", t.first}, {"type_id", 0}}}});
    specials[t.first] = {{"id", t.first}, {"ids", {t.second}}, {"tokens", {t.first}}};
  };
  for (const auto& t : before) add(t);
  single.push_back({{"Sequence", {{"id", "A"}, {"type_id", 0}}}});
  for (const auto& t : after) add(t);
  return {{"type", "TemplateProcessing"}, {"single", single}, {"special_tokens", specials}};
}

// Hugging Face's SentencePieceExtractor: every split of a piece into two pieces of the
// vocabulary is a merge, ranked by the piece's score (higher first), ties by the ids.
json merges_from_scores(const std::vector<std::string>& tokens, const std::vector<double>& scores,
                        const std::vector<int64_t>& types, const std::unordered_map<std::string, int>& ids) {
  struct Merge {
    double score;
    int left, right;
  };
  std::vector<Merge> merges;
  for (size_t id = 0; id < tokens.size(); ++id) {
    if (types[id] != kNormal) continue;
    const std::string& piece = tokens[id];
    std::vector<Merge> local;
    for (size_t at = utf8::sequence_length(piece[0]); at < piece.size(); at += utf8::sequence_length(piece[at])) {
      auto l = ids.find(piece.substr(0, at)), r = ids.find(piece.substr(at));
      if (l != ids.end() && r != ids.end()) local.push_back({scores[id], l->second, r->second});
    }
    std::sort(local.begin(), local.end(), [](const Merge& a, const Merge& b) {
      return a.left != b.left ? a.left < b.left : a.right < b.right;
    });
    merges.insert(merges.end(), local.begin(), local.end());
  }
  std::stable_sort(merges.begin(), merges.end(), [](const Merge& a, const Merge& b) { return a.score > b.score; });
  json out = json::array();
  for (const auto& m : merges) out.push_back(json::array({tokens[size_t(m.left)], tokens[size_t(m.right)]}));
  return out;
}

}  // namespace

Result<json> tokenizer_json_from_gguf(const GgufFile& f, const std::string& source) {
  const GgufValue* model = f.find("tokenizer.ggml.model");
  if (!model || model->type != GgufValueType::string) return bad(source, "tokenizer.ggml.model is missing: the file has no tokenizer");
  const bool spm = model->text == "llama", gemma4 = model->text == "gemma4";
  if (!spm && !gemma4 && model->text != "gpt2")
    return bad(source, "tokenizer model '" + model->text +
                           "' is not supported; expected gpt2 (byte-level BPE), llama (SentencePiece) or gemma4");
  const GgufValue* tokens_value = f.find("tokenizer.ggml.tokens");
  if (!tokens_value || tokens_value->element != GgufValueType::string || tokens_value->strings.empty())
    return bad(source, "tokenizer.ggml.tokens must be a non-empty array of strings");
  const std::vector<std::string>& tokens = tokens_value->strings;
  std::vector<int64_t> types(tokens.size(), kNormal);
  if (const GgufValue* t = f.find("tokenizer.ggml.token_type")) {
    if (t->count() != tokens.size() || t->element == GgufValueType::string)
      return bad(source, "tokenizer.ggml.token_type must have one number per token");
    for (size_t i = 0; i < types.size(); ++i) types[i] = t->integer_at(i);
  }
  auto token_id_key = [&](const char* key) -> int {
    const int64_t id = f.integer_or(key, -1);
    return id >= 0 && uint64_t(id) < tokens.size() ? int(id) : -1;
  };
  const int bos = token_id_key("tokenizer.ggml.bos_token_id"), eos = token_id_key("tokenizer.ggml.eos_token_id");
  const int unk = token_id_key("tokenizer.ggml.unknown_token_id");
  // llama.cpp always adds BOS for gemma4, whatever the file says.
  const bool add_bos = (gemma4 || f.integer_or("tokenizer.ggml.add_bos_token", spm) != 0) && bos >= 0;
  const bool add_eos = f.integer_or("tokenizer.ggml.add_eos_token", false) != 0 && eos >= 0;

  json vocab = json::object(), added = json::array();
  std::unordered_map<std::string, int> ids;
  for (size_t id = 0; id < tokens.size(); ++id) {
    if (types[id] == kControl || types[id] == kUserDefined)
      added.push_back({{"id", id}, {"content", tokens[id]}, {"special", types[id] == kControl}, {"lstrip", false},
                       {"rstrip", false}, {"normalized", false}, {"single_word", false}});
    else
      vocab[tokens[id]] = id;
    ids.emplace(tokens[id], int(id));
  }
  std::vector<std::pair<std::string, int>> before, after;
  if (add_bos) before.emplace_back(tokens[size_t(bos)], bos);
  if (add_eos) after.emplace_back(tokens[size_t(eos)], eos);
  json doc{{"version", "1.0"}, {"added_tokens", added}};
  doc["post_processor"] = before.empty() && after.empty() ? json() : template_processing(before, after);

  if (spm) {
    const GgufValue* scores = f.find("tokenizer.ggml.scores");
    if (!scores || scores->type != GgufValueType::array || scores->element == GgufValueType::string || scores->count() != tokens.size())
      return bad(source, "tokenizer.ggml.scores must have one score per token");
    std::vector<double> score_values(tokens.size());
    for (size_t i = 0; i < tokens.size(); ++i) score_values[i] = scores->real_at(i);
    const bool prefix = f.integer_or("tokenizer.ggml.add_space_prefix", true) != 0;
    json normalizers = json::array();
    if (prefix) normalizers.push_back({{"type", "Prepend"}, {"prepend", kMetaspace}});
    normalizers.push_back({{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", kMetaspace}});
    doc["normalizer"] = {{"type", "Sequence"}, {"normalizers", normalizers}};
    doc["pre_tokenizer"] = nullptr;
    json decoders = json::array({{{"type", "Replace"}, {"pattern", {{"String", kMetaspace}}}, {"content", " "}},
                                 {{"type", "ByteFallback"}}, {{"type", "Fuse"}}});
    if (prefix) decoders.push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
    doc["decoder"] = {{"type", "Sequence"}, {"decoders", decoders}};
    doc["model"] = {{"type", "BPE"}, {"byte_fallback", true}, {"fuse_unk", true},
                    {"unk_token", unk >= 0 ? json(tokens[size_t(unk)]) : json()}, {"vocab", vocab},
                    {"merges", merges_from_scores(tokens, score_values, types, ids)}};
    return doc;
  }

  if (gemma4) {
    // llama.cpp's LLAMA_VOCAB_PRE_TYPE_GEMMA4: spaces become ▁ (no prefix), the text splits
    // only into runs of newlines and runs of the rest, merges by rank over whole UTF-8
    // characters (no byte-level alphabet), bytes of unknown characters as <0xXX>.
    const GgufValue* merges = f.find("tokenizer.ggml.merges");
    if (!merges || merges->element != GgufValueType::string) return bad(source, "tokenizer.ggml.merges must be an array of strings");
    doc["normalizer"] = {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", kMetaspace}};
    doc["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "[^\\n]+|[\\n]+"}}}, {"behavior", "Isolated"}, {"invert", false}};
    doc["decoder"] = {{"type", "Sequence"},
                      {"decoders", json::array({{{"type", "Replace"}, {"pattern", {{"String", kMetaspace}}}, {"content", " "}},
                                                {{"type", "ByteFallback"}}, {{"type", "Fuse"}}})}};
    doc["model"] = {{"type", "BPE"}, {"byte_fallback", true}, {"fuse_unk", true},
                    {"unk_token", unk >= 0 ? json(tokens[size_t(unk)]) : json()}, {"vocab", vocab}, {"merges", merges->strings}};
    return doc;
  }

  const GgufValue* pre_value = f.find("tokenizer.ggml.pre");
  const std::string pre_name = pre_value && pre_value->type == GgufValueType::string ? pre_value->text : "default";
  const PreTokenizer* pre = find_pre(pre_name);
  if (!pre) {
    std::string known;
    for (const auto& p : kPreTokenizers) known += (known.empty() ? "" : ", ") + std::string(p.gguf_name);
    return bad(source, "tokenizer.ggml.pre '" + pre_name + "' is not supported; expected one of " + known);
  }
  const GgufValue* merges = f.find("tokenizer.ggml.merges");
  if (!merges || merges->element != GgufValueType::string) return bad(source, "tokenizer.ggml.merges must be an array of strings");
  doc["normalizer"] = pre->nfc ? json{{"type", "NFC"}} : json();
  if (pre->regex.empty())
    doc["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}};
  else
    doc["pre_tokenizer"] = {{"type", "Sequence"},
                            {"pretokenizers", json::array({{{"type", "Split"}, {"pattern", {{"Regex", pre->regex}}},
                                                            {"behavior", "Isolated"}, {"invert", false}},
                                                           {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}})}};
  doc["decoder"] = {{"type", "ByteLevel"}};
  doc["model"] = {{"type", "BPE"}, {"byte_fallback", false}, {"ignore_merges", pre->ignore_merges},
                  {"vocab", vocab}, {"merges", merges->strings}};
  return doc;
}

Result<std::unique_ptr<Tokenizer>> load_gguf_tokenizer(const GgufFile& file, const std::string& source) {
  auto doc = tokenizer_json_from_gguf(file, source);
  if (!doc) return doc.error();
  auto tok = HfTokenizer::from_json(*doc, source);
  if (!tok) return tok.error();
  return std::unique_ptr<Tokenizer>(std::move(*tok));
}

Result<std::map<std::string, GgufValue>> gguf_tokenizer_metadata(const json& j, const std::string& source, bool gemma4) {
  const json model = j.value("model", json::object());
  if (model.value("type", std::string("BPE")) != "BPE" || !model.contains("vocab") || !model["vocab"].is_object())
    return bad(source, "only BPE tokenizer.json files (byte-level or SentencePiece-style) can go into a GGUF file");
  const bool spm = model.value("byte_fallback", false);
  // Every id, with its type.
  std::map<int64_t, std::pair<std::string, int>> by_id;
  for (const auto& [token, id] : model["vocab"].items())
    if (id.is_number_unsigned()) by_id[id.get<int64_t>()] = {token, kNormal};
  for (const auto& a : j.value("added_tokens", json::array()))
    if (a.contains("id") && a["id"].is_number_unsigned())
      by_id[a["id"].get<int64_t>()] = {a.value("content", std::string()), a.value("special", false) ? kControl : kUserDefined};
  if (by_id.empty() || by_id.rbegin()->first > (1 << 22)) return bad(source, "the vocabulary is empty or its ids are too large");
  std::vector<std::string> tokens;
  std::vector<double> types;
  std::unordered_map<std::string, int> ids;
  for (int64_t id = 0; id <= by_id.rbegin()->first; ++id) {
    auto it = by_id.find(id);
    std::string token = it == by_id.end() ? "[PAD" + std::to_string(id) + "]" : it->second.first;
    int type = it == by_id.end() ? kUnused : it->second.second;
    if (spm && type == kNormal && token.size() == 6 && token.starts_with("<0x") && token.ends_with(">")) type = kByte;
    ids.emplace(token, int(id));
    tokens.push_back(std::move(token));
    types.push_back(type);
  }
  std::map<std::string, GgufValue> meta;
  if (gemma4 && !spm) return bad(source, "a Gemma 4 tokenizer is SentencePiece-style BPE (byte fallback, ▁ for spaces)");
  meta["tokenizer.ggml.model"] = GgufValue::of_string(gemma4 ? "gemma4" : spm ? "llama" : "gpt2");
  meta["tokenizer.ggml.token_type"] = GgufValue::of_array(GgufValueType::i32, types);

  std::vector<std::string> merges;
  for (const auto& m : model.value("merges", json::array())) {
    if (m.is_string()) merges.push_back(m.get<std::string>());
    else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string())
      merges.push_back(m[0].get<std::string>() + " " + m[1].get<std::string>());
    else return bad(source, "a merge is neither \"a b\" nor [\"a\", \"b\"]");
  }
  if (gemma4) {
    // llama.cpp's converter keeps Gemma 4's merges (no scores to derive them from).
    meta["tokenizer.ggml.merges"] = GgufValue::of_strings(merges);
    meta["tokenizer.ggml.add_space_prefix"] = GgufValue::of(GgufValueType::boolean, false);
  } else if (spm) {
    // SentencePiece merges by the merged piece's score: the earlier its first merge, the higher.
    std::vector<double> scores(tokens.size(), -1e9);
    for (size_t rank = 0; rank < merges.size(); ++rank) {
      const size_t space = merges[rank].find(' ');
      auto it = ids.find(merges[rank].substr(0, space) + merges[rank].substr(space + 1));
      if (it != ids.end() && scores[size_t(it->second)] == -1e9) scores[size_t(it->second)] = -double(rank);
    }
    meta["tokenizer.ggml.scores"] = GgufValue::of_array(GgufValueType::f32, scores);
    bool prefix = false;
    const json normalizer = j.value("normalizer", json());
    for (const auto& n : normalizer.is_object() ? normalizer.value("normalizers", json::array({normalizer})) : json::array())
      if (n.value("type", std::string()) == "Prepend") prefix = true;
    const json pre = j.value("pre_tokenizer", json());
    if (pre.is_object() && pre.value("type", std::string()) == "Metaspace") prefix = pre.value("prepend_scheme", std::string("always")) != "never";
    meta["tokenizer.ggml.add_space_prefix"] = GgufValue::of(GgufValueType::boolean, prefix);
    if (model.contains("unk_token") && model["unk_token"].is_string())
      if (auto it = ids.find(model["unk_token"].get<std::string>()); it != ids.end())
        meta["tokenizer.ggml.unknown_token_id"] = GgufValue::of(GgufValueType::u32, it->second);
  } else {
    const json pre = j.value("pre_tokenizer", json());
    std::string name;
    if (pre.is_object() && pre.value("type", std::string()) == "ByteLevel" && pre.value("use_regex", true)) name = "gpt-2";
    if (pre.is_object() && pre.value("type", std::string()) == "Sequence")
      for (const auto& p : pre.value("pretokenizers", json::array()))
        if (p.value("type", std::string()) == "Split" && p.contains("pattern") && p["pattern"].contains("Regex"))
          for (const auto& known : kPreTokenizers)
            if (!known.regex.empty() && p["pattern"]["Regex"] == known.regex) name = known.gguf_name;
    if (name.empty()) return bad(source, "its pre-tokenizer matches none of GPT-2's, Llama 3's, Qwen 2's or o200k's");
    meta["tokenizer.ggml.pre"] = GgufValue::of_string(name);
    meta["tokenizer.ggml.merges"] = GgufValue::of_strings(merges);
  }
  meta["tokenizer.ggml.tokens"] = GgufValue::of_strings(std::move(tokens));

  // BOS/EOS the post-processor adds.
  bool add_bos = false, add_eos = false;
  const json post = j.value("post_processor", json());
  for (const auto& p : post.is_object() ? post.value("processors", json::array({post})) : json::array()) {
    if (p.value("type", std::string()) != "TemplateProcessing") continue;
    const json single = p.value("single", json::array());
    for (size_t i = 0; i < single.size(); ++i) {
      if (!single[i].contains("SpecialToken")) continue;
      auto it = ids.find(single[i]["SpecialToken"].value("id", std::string()));
      if (it == ids.end()) continue;
      const bool first = i == 0;
      meta[first ? "tokenizer.ggml.bos_token_id" : "tokenizer.ggml.eos_token_id"] = GgufValue::of(GgufValueType::u32, it->second);
      (first ? add_bos : add_eos) = true;
    }
  }
  meta["tokenizer.ggml.add_bos_token"] = GgufValue::of(GgufValueType::boolean, add_bos);
  meta["tokenizer.ggml.add_eos_token"] = GgufValue::of(GgufValueType::boolean, add_eos);
  return meta;
}

}  // namespace larql
