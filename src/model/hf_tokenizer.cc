#include "model/hf_tokenizer.h"

#include <utf8proc.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <queue>

#include "model/regex.h"
#include "model/utf8.h"

namespace larql {

using nlohmann::json;

// GPT-2's pre-tokenizer pattern (ByteLevel with use_regex).
static const char* kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
static const std::string kMetaspace = "\xE2\x96\x81";  // ▁

// A literal or regex pattern, as tokenizer.json writes {"String": ...} / {"Regex": ...}.
struct Pattern {
  std::string literal;
  std::shared_ptr<Regex> regex;

  std::vector<std::pair<size_t, size_t>> find_all(std::string_view s) const {
    if (regex) return regex->find_all(s);
    std::vector<std::pair<size_t, size_t>> out;
    if (literal.empty()) return out;
    for (size_t at = s.find(literal); at != std::string_view::npos; at = s.find(literal, at + literal.size()))
      out.emplace_back(at, at + literal.size());
    return out;
  }
};

struct HfTokenizer::NormalizerStep {
  enum Kind { nfc, nfkc, nfd, nfkd, prepend, replace, lowercase } kind;
  std::string text;  // prepend / replacement content
  Pattern pattern;
};

struct HfTokenizer::PreTokenizerStep {
  enum Kind { split, byte_level, metaspace } kind;
  Pattern pattern;
  std::string behavior = "Isolated";
  bool invert = false;
  bool add_prefix_space = false;
  bool use_regex = false;
  std::string replacement = kMetaspace;
  std::string prepend_scheme = "always";
  bool metaspace_split = true;
};

struct HfTokenizer::DecoderStep {
  enum Kind { byte_level, replace, byte_fallback, fuse, strip, metaspace } kind;
  Pattern pattern;
  std::string text;  // replace content, strip content, metaspace replacement
  size_t start = 0, stop = 0;
  std::string prepend_scheme = "always";
};

namespace {

Error bad_file(const std::string& path, const std::string& what) {
  return make_error(ErrorCode::invalid_argument, path + ": " + what);
}

Result<Pattern> read_pattern(const json& j) {
  Pattern p;
  if (j.contains("String") && j["String"].is_string()) {
    p.literal = j["String"].get<std::string>();
  } else if (j.contains("Regex") && j["Regex"].is_string()) {
    auto re = Regex::compile(j["Regex"].get<std::string>());
    if (!re) return re.error();
    p.regex = *re;
  } else {
    return make_error(ErrorCode::invalid_argument, "pattern must be {\"String\": ...} or {\"Regex\": ...}");
  }
  return p;
}

// Flattens {"type": "Sequence", key: [...]} into its steps (nesting bounded: the file
// decides the depth).
Status flatten(const json& j, const char* list_key, std::vector<json>& out, int depth = 0) {
  if (j.is_null()) return Ok{};
  if (!j.is_object()) return make_error(ErrorCode::invalid_argument, std::string("a step of '") + list_key + "' is not an object");
  if (j.value("type", "") != "Sequence") {
    out.push_back(j);
    return Ok{};
  }
  if (depth > 16) return make_error(ErrorCode::invalid_argument, std::string("'") + list_key + "' nests Sequences deeper than 16");
  if (!j.contains(list_key) || !j[list_key].is_array())
    return make_error(ErrorCode::invalid_argument, std::string("a Sequence lacks its '") + list_key + "' array");
  for (const auto& child : j[list_key])
    if (auto s = flatten(child, list_key, out, depth + 1); !s) return s;
  return Ok{};
}

std::string utf8proc_normalize(const std::string& s, utf8proc_option_t options) {
  utf8proc_uint8_t* out = nullptr;
  const auto len = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()), utf8proc_ssize_t(s.size()), &out,
                                utf8proc_option_t(options | UTF8PROC_STABLE));
  if (len < 0) return s;  // invalid UTF-8: left as is, the model step falls back to bytes
  std::string result(reinterpret_cast<char*>(out), size_t(len));
  std::free(out);
  return result;
}

std::string replace_all(const std::string& s, const Pattern& p, const std::string& content) {
  std::string out;
  size_t last = 0;
  for (auto [b, e] : p.find_all(s)) {
    out.append(s, last, b - last);
    out += content;
    last = e;
  }
  out.append(s, last, std::string::npos);
  return out;
}

// Splits `s` around the matches of `p` as tokenizer.json's SplitDelimiterBehavior says.
std::vector<std::string> split_by(const std::string& s, const Pattern& p, const std::string& behavior, bool invert) {
  std::vector<std::pair<std::pair<size_t, size_t>, bool>> parts;  // (range, is_match)
  size_t last = 0;
  for (auto [b, e] : p.find_all(s)) {
    if (b > last) parts.push_back({{last, b}, invert});
    parts.push_back({{b, e}, !invert});
    last = e;
  }
  if (last < s.size()) parts.push_back({{last, s.size()}, invert});
  std::vector<std::string> out;
  bool glue_next = false;
  for (auto [range, is_match] : parts) {
    std::string piece = s.substr(range.first, range.second - range.first);
    if (behavior == "Removed" && is_match) continue;
    if (glue_next) {
      out.back() += piece;
      glue_next = false;
      continue;
    }
    if (behavior == "MergedWithPrevious" && is_match && !out.empty()) {
      out.back() += piece;
    } else {
      out.push_back(piece);
      if (behavior == "MergedWithNext" && is_match) glue_next = true;
    }
  }
  return out;
}

}  // namespace

HfTokenizer::HfTokenizer() = default;
HfTokenizer::~HfTokenizer() = default;

Result<std::unique_ptr<HfTokenizer>> HfTokenizer::load(const std::string& path) {
  std::ifstream in(path);
  if (!in) return bad_file(path, "cannot be read");
  const json doc = json::parse(in, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) return bad_file(path, "is not a JSON object");
  return from_json(doc, path);
}

Result<std::unique_ptr<HfTokenizer>> HfTokenizer::from_json(const json& doc, const std::string& source) {
  try {
    return from_document(doc, source);
  } catch (const json::exception& e) {
    return bad_file(source, std::string("has a field of the wrong type: ") + e.what());
  }
}

Result<std::unique_ptr<HfTokenizer>> HfTokenizer::from_document(const json& doc, const std::string& path) {
  auto tok = std::unique_ptr<HfTokenizer>(new HfTokenizer());

  const json& model = doc.value("model", json::object());
  if (model.value("type", "BPE") != "BPE")
    return bad_file(path, "model type '" + model.value("type", std::string()) + "' is not supported; expected BPE");
  if (!model.contains("vocab") || !model["vocab"].is_object()) return bad_file(path, "model.vocab is missing");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (model.contains(key) && model[key].is_string() && !model[key].get<std::string>().empty())
      return bad_file(path, std::string("model.") + key + " is not supported");
  // Ids index a table: bounded far above any real vocabulary (262,144 is the largest in use).
  constexpr uint64_t kMaxTokenId = (1u << 22) - 1;
  auto bad_id = [](const json& id) { return !id.is_number_unsigned() || id.get<uint64_t>() > kMaxTokenId; };
  for (const auto& [token, id] : model["vocab"].items()) {
    if (bad_id(id))
      return bad_file(path, "vocab id of '" + token + "' is not a number from 0 to " + std::to_string(kMaxTokenId));
    tok->vocab_[token] = id.get<int>();
  }
  for (const auto& a : doc.value("added_tokens", json::array())) {
    if (!a.is_object() || !a.contains("id") || bad_id(a["id"]))
      return bad_file(path, "an added token lacks an id from 0 to " + std::to_string(kMaxTokenId));
    AddedToken t{a.value("content", std::string()), a["id"].get<int>(), a.value("special", false), a.value("lstrip", false),
                 a.value("rstrip", false)};
    if (t.content.empty()) return bad_file(path, "an added token lacks content");
    if (t.special) tok->special_ids_.insert(t.id);
    tok->added_.push_back(t);
    tok->vocab_.emplace(t.content, t.id);
  }
  std::stable_sort(tok->added_.begin(), tok->added_.end(),
                   [](const AddedToken& a, const AddedToken& b) { return a.content.size() > b.content.size(); });
  for (size_t i = 0; i < tok->added_.size(); ++i) tok->added_at_.add(tok->added_[i].content, int(i));
  int max_id = -1;
  for (const auto& [token, id] : tok->vocab_) max_id = std::max(max_id, id);
  tok->id_to_token_.resize(size_t(max_id + 1));
  for (const auto& [token, id] : tok->vocab_) tok->id_to_token_[size_t(id)] = token;

  int rank = 0;
  for (const auto& m : model.value("merges", json::array())) {
    std::string left, right;
    if (m.is_string()) {  // "left right"
      const std::string s = m.get<std::string>();
      const size_t space = s.find(' ');
      if (space == std::string::npos) return bad_file(path, "merge '" + s + "' has no space");
      left = s.substr(0, space);
      right = s.substr(space + 1);
    } else if (m.is_array() && m.size() == 2) {  // ["left", "right"]
      left = m[0].get<std::string>();
      right = m[1].get<std::string>();
    } else {
      return bad_file(path, "merge #" + std::to_string(rank) + " is neither \"a b\" nor [\"a\", \"b\"]");
    }
    tok->merge_rank_.emplace(left + '\0' + right, rank++);
  }
  tok->byte_fallback_ = model.value("byte_fallback", false);
  tok->fuse_unk_ = model.value("fuse_unk", false);
  tok->ignore_merges_ = model.value("ignore_merges", false);
  if (model.contains("unk_token") && model["unk_token"].is_string()) tok->unk_id_ = tok->token_id(model["unk_token"]);

  std::vector<json> steps;
  if (auto s = flatten(doc.value("normalizer", json()), "normalizers", steps); !s) return bad_file(path, s.error().message);
  for (const auto& n : steps) {
    const std::string type = n.value("type", "");
    NormalizerStep step{NormalizerStep::nfc, {}, {}};
    if (type == "NFC") step.kind = NormalizerStep::nfc;
    else if (type == "NFKC") step.kind = NormalizerStep::nfkc;
    else if (type == "NFD") step.kind = NormalizerStep::nfd;
    else if (type == "NFKD") step.kind = NormalizerStep::nfkd;
    else if (type == "Lowercase") step.kind = NormalizerStep::lowercase;
    else if (type == "Prepend") step = {NormalizerStep::prepend, n.value("prepend", std::string()), {}};
    else if (type == "Replace") {
      auto p = read_pattern(n.value("pattern", json::object()));
      if (!p) return bad_file(path, "normalizer Replace: " + p.error().message);
      step = {NormalizerStep::replace, n.value("content", std::string()), *p};
    } else return bad_file(path, "normalizer '" + type + "' is not supported");
    tok->normalizers_.push_back(std::move(step));
  }

  steps.clear();
  if (auto s = flatten(doc.value("pre_tokenizer", json()), "pretokenizers", steps); !s) return bad_file(path, s.error().message);
  for (const auto& p : steps) {
    const std::string type = p.value("type", "");
    PreTokenizerStep step{};
    step.kind = PreTokenizerStep::split;
    if (type == "Split") {
      auto pattern = read_pattern(p.value("pattern", json::object()));
      if (!pattern) return bad_file(path, "pre_tokenizer Split: " + pattern.error().message);
      step.pattern = *pattern;
      step.behavior = p.value("behavior", std::string("Isolated"));
      step.invert = p.value("invert", false);
      if (step.behavior != "Isolated" && step.behavior != "Removed" && step.behavior != "MergedWithPrevious" &&
          step.behavior != "MergedWithNext")
        return bad_file(path, "Split behavior '" + step.behavior + "' is not supported");
    } else if (type == "ByteLevel") {
      step.kind = PreTokenizerStep::byte_level;
      step.add_prefix_space = p.value("add_prefix_space", false);
      step.use_regex = p.value("use_regex", true);
      if (step.use_regex) {
        auto re = Regex::compile(kGpt2Pattern);
        if (!re) return re.error();
        step.pattern.regex = *re;
      }
    } else if (type == "Metaspace") {
      step.kind = PreTokenizerStep::metaspace;
      step.replacement = p.value("replacement", kMetaspace);
      step.prepend_scheme = p.value("prepend_scheme", std::string(p.value("add_prefix_space", true) ? "always" : "never"));
      step.metaspace_split = p.value("split", true);
    } else {
      return bad_file(path, "pre_tokenizer '" + type + "' is not supported");
    }
    tok->pre_tokenizers_.push_back(std::move(step));
  }

  steps.clear();
  if (auto s = flatten(doc.value("decoder", json()), "decoders", steps); !s) return bad_file(path, s.error().message);
  for (const auto& d : steps) {
    const std::string type = d.value("type", "");
    DecoderStep step{};
    step.kind = DecoderStep::fuse;
    if (type == "ByteLevel") step.kind = DecoderStep::byte_level;
    else if (type == "ByteFallback") step.kind = DecoderStep::byte_fallback;
    else if (type == "Fuse") step.kind = DecoderStep::fuse;
    else if (type == "Replace") {
      auto p = read_pattern(d.value("pattern", json::object()));
      if (!p) return bad_file(path, "decoder Replace: " + p.error().message);
      step.kind = DecoderStep::replace;
      step.pattern = *p;
      step.text = d.value("content", std::string());
    } else if (type == "Strip") {
      step.kind = DecoderStep::strip;
      step.text = d.value("content", std::string(" "));
      step.start = d.value("start", size_t{0});
      step.stop = d.value("stop", size_t{0});
    } else if (type == "Metaspace") {
      step.kind = DecoderStep::metaspace;
      step.text = d.value("replacement", kMetaspace);
      step.prepend_scheme = d.value("prepend_scheme", std::string(d.value("add_prefix_space", true) ? "always" : "never"));
    } else {
      return bad_file(path, "decoder '" + type + "' is not supported");
    }
    tok->decoders_.push_back(std::move(step));
  }

  steps.clear();
  if (auto s = flatten(doc.value("post_processor", json()), "processors", steps); !s) return bad_file(path, s.error().message);
  for (const auto& p : steps) {
    const std::string type = p.value("type", "");
    if (type == "ByteLevel") continue;  // offsets only; ids are unchanged
    if (type != "TemplateProcessing") return bad_file(path, "post_processor '" + type + "' is not supported");
    for (const auto& item : p.value("single", json::array())) {
      if (item.contains("Sequence")) tok->template_single_.push_back("$A");
      else if (item.contains("SpecialToken")) tok->template_single_.push_back(item["SpecialToken"].value("id", std::string()));
    }
    const json specials = p.value("special_tokens", json::object());  // items() must not outlive it
    for (const auto& [name, spec] : specials.items()) {
      auto ids = spec.value("ids", std::vector<int>{});
      for (int id : ids)
        if (id < 0 || size_t(id) >= tok->id_to_token_.size())
          return bad_file(path, "post_processor special token '" + name + "' has id " + std::to_string(id) +
                                    ", outside the vocabulary of " + std::to_string(tok->id_to_token_.size()));
      tok->template_ids_[name] = std::move(ids);
    }
  }
  tok->token_context_ = tok->decode_pieces({"a"}, false);
  return tok;
}

int HfTokenizer::token_id(const std::string& token) const {
  auto it = vocab_.find(token);
  return it == vocab_.end() ? -1 : it->second;
}

bool HfTokenizer::is_added_token(int id) const {
  return std::any_of(added_.begin(), added_.end(), [id](const AddedToken& a) { return a.id == id; });
}

std::string HfTokenizer::piece(int id) const {
  return id >= 0 && size_t(id) < id_to_token_.size() ? id_to_token_[size_t(id)] : std::string();
}

std::string HfTokenizer::normalize(std::string s) const {
  for (const auto& n : normalizers_) {
    switch (n.kind) {
      case NormalizerStep::nfc: s = utf8proc_normalize(s, UTF8PROC_COMPOSE); break;
      case NormalizerStep::nfkc: s = utf8proc_normalize(s, utf8proc_option_t(UTF8PROC_COMPOSE | UTF8PROC_COMPAT)); break;
      case NormalizerStep::nfd: s = utf8proc_normalize(s, UTF8PROC_DECOMPOSE); break;
      case NormalizerStep::nfkd: s = utf8proc_normalize(s, utf8proc_option_t(UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT)); break;
      case NormalizerStep::lowercase: s = utf8proc_normalize(s, UTF8PROC_CASEFOLD); break;
      case NormalizerStep::prepend:
        if (!s.empty()) s = n.text + s;
        break;
      case NormalizerStep::replace: s = replace_all(s, n.pattern, n.text); break;
    }
  }
  return s;
}

std::vector<std::string> HfTokenizer::pre_tokenize(const std::string& s, bool at_text_start) const {
  std::vector<std::string> pieces{s};
  for (const auto& p : pre_tokenizers_) {
    std::vector<std::string> next;
    for (size_t i = 0; i < pieces.size(); ++i) {
      std::string piece = pieces[i];
      switch (p.kind) {
        case PreTokenizerStep::split:
          for (auto& part : split_by(piece, p.pattern, p.behavior, p.invert)) next.push_back(std::move(part));
          break;
        case PreTokenizerStep::byte_level: {
          if (p.add_prefix_space && i == 0 && at_text_start && !piece.empty() && piece[0] != ' ') piece = " " + piece;
          std::vector<std::string> parts = p.use_regex ? split_by(piece, p.pattern, "Isolated", false) : std::vector{piece};
          for (const auto& part : parts) {
            std::string mapped;
            for (unsigned char b : part) mapped += utf8::byte_to_char(b);
            next.push_back(std::move(mapped));
          }
          break;
        }
        case PreTokenizerStep::metaspace: {
          Pattern space{" ", nullptr};
          piece = replace_all(piece, space, p.replacement);
          const bool prepend = p.prepend_scheme == "always" || (p.prepend_scheme == "first" && i == 0 && at_text_start);
          if (prepend && piece.compare(0, p.replacement.size(), p.replacement) != 0) piece = p.replacement + piece;
          if (p.metaspace_split) {
            for (auto& part : split_by(piece, Pattern{p.replacement, nullptr}, "MergedWithNext", false))
              next.push_back(std::move(part));
          } else {
            next.push_back(piece);
          }
          break;
        }
      }
    }
    pieces = std::move(next);
  }
  std::erase_if(pieces, [](const std::string& x) { return x.empty(); });
  return pieces;
}

// Merges the adjacent pair of lowest rank (leftmost on ties) until no pair has a merge,
// with a heap as Hugging Face's BPE does.
void HfTokenizer::bpe(const std::string& word, std::vector<int>& out) const {
  if (ignore_merges_) {
    if (int id = token_id(word); id >= 0) {
      out.push_back(id);
      return;
    }
  }
  std::vector<std::string> sym = utf8::characters(word);
  const int n = int(sym.size());
  std::vector<int> prev(n), next(n);
  std::vector<bool> alive(n, true);
  for (int i = 0; i < n; ++i) {
    prev[i] = i - 1;
    next[i] = i + 1 < n ? i + 1 : -1;
  }
  using Entry = std::pair<int, int>;  // (rank, left index)
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap;
  auto rank_of = [&](int i) {
    if (i < 0 || next[i] < 0) return -1;
    auto it = merge_rank_.find(sym[i] + '\0' + sym[next[i]]);
    return it == merge_rank_.end() ? -1 : it->second;
  };
  for (int i = 0; i < n; ++i)
    if (int r = rank_of(i); r >= 0) heap.push({r, i});
  while (!heap.empty()) {
    const auto [r, i] = heap.top();
    heap.pop();
    if (!alive[i] || rank_of(i) != r) continue;  // stale entry
    const int j = next[i];
    sym[i] += sym[j];
    alive[j] = false;
    next[i] = next[j];
    if (next[j] >= 0) prev[next[j]] = i;
    if (int pr = rank_of(prev[i]); pr >= 0) heap.push({pr, prev[i]});
    if (int nr = rank_of(i); nr >= 0) heap.push({nr, i});
  }
  bool last_unk = false;
  for (int i = 0; i >= 0 && i < n; i = next[i]) {
    if (int id = token_id(sym[i]); id >= 0) {
      out.push_back(id);
      last_unk = false;
      continue;
    }
    if (byte_fallback_) {
      std::vector<int> bytes;
      for (unsigned char b : sym[i]) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", b);
        bytes.push_back(token_id(name));
      }
      if (std::find(bytes.begin(), bytes.end(), -1) == bytes.end()) {
        out.insert(out.end(), bytes.begin(), bytes.end());
        last_unk = false;
        continue;
      }
    }
    if (unk_id_ >= 0 && !(fuse_unk_ && last_unk)) out.push_back(unk_id_);
    last_unk = true;
  }
}

std::vector<int> HfTokenizer::encode_plain(std::string_view text) const {
  std::vector<int> ids;
  auto encode_segment = [&](std::string segment, bool at_text_start) {
    if (segment.empty()) return;
    for (const auto& word : pre_tokenize(normalize(std::move(segment)), at_text_start)) bpe(word, ids);
  };
  // Added tokens are found in the raw text first, leftmost and then longest.
  size_t segment_start = 0, i = 0;
  while (i < text.size()) {
    const int found = added_at_.longest_at(text, i);
    if (found < 0) {
      ++i;
      continue;
    }
    const AddedToken* hit = &added_[size_t(found)];
    size_t seg_end = i;
    if (hit->lstrip)
      while (seg_end > segment_start && std::isspace(static_cast<unsigned char>(text[seg_end - 1]))) --seg_end;
    encode_segment(std::string(text.substr(segment_start, seg_end - segment_start)), segment_start == 0);
    ids.push_back(hit->id);
    i += hit->content.size();
    if (hit->rstrip)
      while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    segment_start = i;
  }
  encode_segment(std::string(text.substr(segment_start)), segment_start == 0);
  return ids;
}

std::vector<int> HfTokenizer::encode(std::string_view text) const {
  std::vector<int> body = encode_plain(text);
  if (template_single_.empty()) return body;
  std::vector<int> out;
  for (const auto& item : template_single_) {
    if (item == "$A") {
      out.insert(out.end(), body.begin(), body.end());
    } else if (auto it = template_ids_.find(item); it != template_ids_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
    }
  }
  return out;
}

std::string HfTokenizer::decode(std::span<const int> ids) const {
  std::vector<std::string> tokens;
  for (int id : ids) tokens.push_back(piece(id));
  return decode_pieces(std::move(tokens), true);
}

std::optional<std::string> HfTokenizer::token_bytes(int id) const {
  if (id < 0 || size_t(id) >= id_to_token_.size()) return std::nullopt;
  if (special_ids_.count(id)) return std::nullopt;
  // After a plain "a", so that rules for a text's start (a stripped leading space) do not apply.
  std::string text = decode_pieces({"a", piece(id)}, false);
  if (text.compare(0, token_context_.size(), token_context_) != 0) return std::nullopt;
  return text.substr(token_context_.size());
}

std::string HfTokenizer::decode_pieces(std::vector<std::string> tokens, bool lossy) const {
  for (const auto& d : decoders_) {
    switch (d.kind) {
      case DecoderStep::byte_level: {
        std::string bytes;
        for (const auto& t : tokens)
          for (const auto& c : utf8::characters(t)) {
            uint8_t b;
            if (utf8::char_to_byte(c, &b)) bytes += char(b);
            else bytes += c;
          }
        tokens = {lossy ? utf8::lossy(bytes) : bytes};
        break;
      }
      case DecoderStep::replace:
        for (auto& t : tokens) t = replace_all(t, d.pattern, d.text);
        break;
      case DecoderStep::byte_fallback: {
        std::vector<std::string> out;
        std::string pending;
        size_t pending_count = 0;
        auto flush = [&] {
          if (pending_count == 0) return;
          if (!lossy || utf8::lossy(pending) == pending) {
            out.push_back(pending);
          } else {
            for (size_t k = 0; k < pending_count; ++k) out.push_back(std::string(utf8::kReplacementChar));
          }
          pending.clear();
          pending_count = 0;
        };
        for (const auto& t : tokens) {
          unsigned value;
          if (t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>' && std::sscanf(t.c_str() + 3, "%2x", &value) == 1) {
            pending += char(value);
            ++pending_count;
          } else {
            flush();
            out.push_back(t);
          }
        }
        flush();
        tokens = std::move(out);
        break;
      }
      case DecoderStep::fuse: {
        std::string all;
        for (const auto& t : tokens) all += t;
        tokens = {all};
        break;
      }
      case DecoderStep::strip:
        for (auto& t : tokens) {
          size_t front = 0, back = 0;
          while (front < d.start && t.compare(front * d.text.size(), d.text.size(), d.text) == 0) ++front;
          t.erase(0, front * d.text.size());
          while (back < d.stop && t.size() >= d.text.size() * (back + 1) &&
                 t.compare(t.size() - d.text.size() * (back + 1), d.text.size(), d.text) == 0)
            ++back;
          t.resize(t.size() - back * d.text.size());
        }
        break;
      case DecoderStep::metaspace:
        for (size_t k = 0; k < tokens.size(); ++k) {
          tokens[k] = replace_all(tokens[k], Pattern{d.text, nullptr}, " ");
          if (k == 0 && d.prepend_scheme != "never" && !tokens[k].empty() && tokens[k][0] == ' ') tokens[k].erase(0, 1);
        }
        break;
    }
  }
  std::string text;
  for (const auto& t : tokens) text += t;
  return text;
}

}  // namespace larql
