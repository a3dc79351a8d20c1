#include "model/llama2c_tokenizer.h"

#include <cctype>
#include <cstring>
#include <queue>

#include "model/mapped_file.h"

namespace larql {

Result<std::unique_ptr<Llama2cTokenizer>> Llama2cTokenizer::load(const std::string& path, size_t expected_vocab) {
  auto file = MappedFile::open(path);
  if (!file) return file.error();
  const uint8_t* p = (*file)->data();
  const size_t size = (*file)->size();
  auto fail = [&](const std::string& what) { return make_error(ErrorCode::invalid_argument, path + ": " + what); };
  if (size < 4) return fail("too short for a llama2.c tokenizer (no max_token_length)");
  size_t off = 4;  // max_token_length: not needed, pieces carry their own lengths
  auto tok = std::make_unique<Llama2cTokenizer>();
  while (off < size) {
    if (size - off < 8) return fail("ends inside the header of piece " + std::to_string(tok->pieces_.size()));
    float score;
    int32_t len;
    std::memcpy(&score, p + off, 4);
    std::memcpy(&len, p + off + 4, 4);
    off += 8;
    if (len < 0 || size_t(len) > size - off)
      return fail("piece " + std::to_string(tok->pieces_.size()) + " claims " + std::to_string(len) +
                  " bytes, but only " + std::to_string(size - off) + " remain");
    tok->pieces_.emplace_back(reinterpret_cast<const char*>(p + off), size_t(len));
    tok->scores_.push_back(score);
    off += size_t(len);
  }
  if (expected_vocab != 0 && tok->pieces_.size() != expected_vocab)
    return fail("holds " + std::to_string(tok->pieces_.size()) + " pieces; the model's vocabulary has " +
                std::to_string(expected_vocab));
  if (tok->pieces_.size() < 3 + 256)
    return fail("holds " + std::to_string(tok->pieces_.size()) + " pieces; a llama2.c vocabulary has at least 259 (3 specials + 256 bytes)");
  for (size_t i = 0; i < tok->pieces_.size(); ++i) tok->ids_.emplace(tok->pieces_[i], int(i));  // first id wins
  return tok;
}

int Llama2cTokenizer::lookup(const std::string& s) const {
  auto it = ids_.find(s);
  return it == ids_.end() ? -1 : it->second;
}

std::vector<int> Llama2cTokenizer::encode(std::string_view text) const {
  std::vector<int> tokens{kBos};
  if (!text.empty()) {
    int prefix = lookup(" ");
    if (prefix >= 0) tokens.push_back(prefix);
  }
  // One token per UTF-8 code point (run.c groups a lead byte with up to 3 continuation bytes).
  for (size_t i = 0; i < text.size();) {
    size_t len = 1;
    while (i + len < text.size() && (static_cast<unsigned char>(text[i + len]) & 0xC0) == 0x80 && len < 4) ++len;
    const std::string cp(text.substr(i, len));
    const int id = lookup(cp);
    if (id >= 0) {
      tokens.push_back(id);
    } else {
      for (unsigned char b : cp) tokens.push_back(int(b) + 3);
    }
    i += len;
  }
  return merge_pairs(std::move(tokens));
}

// run.c merges the best-scoring adjacent pair (the leftmost of equals; a score must beat
// -1e10) until none is in the vocabulary, rescanning every pair per merge: quadratic, a
// 20 KB prompt took 2.4 s. The same merges in the same order from a heap of candidate
// pairs, best score first and then leftmost: the merged symbol keeps its left one's index,
// so index order is text order. A candidate whose symbols changed since is skipped.
std::vector<int> Llama2cTokenizer::merge_pairs(std::vector<int> tokens) const {
  constexpr int kNone = -1;
  const int n = int(tokens.size());
  std::vector<int> next(tokens.size()), prev(tokens.size());
  std::vector<uint32_t> version(tokens.size(), 0);  // bumped when a symbol merges
  for (int i = 0; i < n; ++i) prev[size_t(i)] = i - 1, next[size_t(i)] = i + 1 < n ? i + 1 : kNone;
  struct Candidate {
    float score;
    int left, right, id;
    uint32_t left_version, right_version;
  };
  auto after = [](const Candidate& a, const Candidate& b) { return a.score != b.score ? a.score < b.score : a.left > b.left; };
  std::priority_queue<Candidate, std::vector<Candidate>, decltype(after)> heap(after);
  auto consider = [&](int left) {
    if (left == kNone || next[size_t(left)] == kNone) return;
    const int right = next[size_t(left)];
    const int id = lookup(pieces_[size_t(tokens[size_t(left)])] + pieces_[size_t(tokens[size_t(right)])]);
    if (id >= 0 && scores_[size_t(id)] > -1e10f)
      heap.push({scores_[size_t(id)], left, right, id, version[size_t(left)], version[size_t(right)]});
  };
  for (int i = 0; i + 1 < n; ++i) consider(i);
  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    const auto l = size_t(c.left), r = size_t(c.right);
    if (tokens[l] == kNone || next[l] != c.right || version[l] != c.left_version || version[r] != c.right_version) continue;
    tokens[l] = c.id;
    ++version[l];
    tokens[r] = kNone;
    next[l] = next[r];
    if (next[r] != kNone) prev[size_t(next[r])] = c.left;
    consider(prev[l]);
    consider(c.left);
  }
  std::erase(tokens, kNone);
  return tokens;
}

std::string Llama2cTokenizer::piece(int id) const {
  return id >= 0 && size_t(id) < pieces_.size() ? pieces_[id] : std::string();
}

std::string Llama2cTokenizer::decode(std::span<const int> ids) const {
  std::string out;
  for (size_t i = 1; i < ids.size(); ++i) out += decode_step(ids[i - 1], ids[i]);
  return out;
}

std::optional<std::string> Llama2cTokenizer::token_bytes(int id) const {
  if (id <= 2 || size_t(id) >= pieces_.size()) return std::nullopt;
  return decode_step(kBos + 1, id);
}

std::string Llama2cTokenizer::decode_step(int prev, int token) const {
  std::string_view p = token >= 0 && size_t(token) < pieces_.size() ? std::string_view(pieces_[token]) : "";
  if (prev == kBos && !p.empty() && p[0] == ' ') p.remove_prefix(1);  // run.c strips the prefix space after BOS
  if (p.size() >= 4 && p.substr(0, 3) == "<0x" && std::isxdigit(static_cast<unsigned char>(p[3]))) {
    unsigned value = 0;
    for (size_t i = 3; i < p.size() && i < 5 && std::isxdigit(static_cast<unsigned char>(p[i])); ++i)
      value = value * 16 + unsigned(std::isdigit(static_cast<unsigned char>(p[i])) ? p[i] - '0' : (std::tolower(p[i]) - 'a' + 10));
    const unsigned char byte = static_cast<unsigned char>(value);
    // run.c prints a lone byte only if it is printable or white space; we also keep bytes
    // ≥ 0x80 so multi-byte UTF-8 sent as byte tokens survives (run.c drops them).
    if (byte < 0x80 && !(std::isprint(byte) || std::isspace(byte))) return {};
    return std::string(1, static_cast<char>(byte));
  }
  if (p.size() == 1) {
    const unsigned char byte = static_cast<unsigned char>(p[0]);
    if (byte < 0x80 && !(std::isprint(byte) || std::isspace(byte))) return {};
  }
  return std::string(p);
}

}  // namespace larql
