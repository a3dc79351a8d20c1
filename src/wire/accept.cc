#include "wire/accept.h"

#include <optional>

#include "wire/text.h"

namespace larql::wire {
namespace {

// Splits on `sep` outside double-quoted strings (parameter values may be quoted).
std::vector<std::string_view> split_unquoted(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  bool quoted = false;
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (quoted && c == '\\') {
      ++i;  // skip the escaped character
    } else if (c == '"') {
      quoted = !quoted;
    } else if (c == sep && !quoted) {
      parts.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  }
  parts.push_back(s.substr(start));
  return parts;
}

bool is_token_char(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  static constexpr std::string_view kSpecials = "!#$%&'*+-.^_`|~";
  return kSpecials.find(c) != std::string_view::npos;
}

bool is_token(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!is_token_char(c)) return false;
  return true;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = ascii_lower(c);
  return out;
}

// qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] ), in thousandths.
std::optional<int> parse_qvalue(std::string_view v) {
  if (v.empty() || (v[0] != '0' && v[0] != '1')) return std::nullopt;
  int whole = v[0] - '0';
  if (v.size() == 1) return whole * 1000;
  if (v[1] != '.' || v.size() > 5) return std::nullopt;
  int frac = 0;
  int scale = 100;
  for (size_t i = 2; i < v.size(); ++i) {
    if (v[i] < '0' || v[i] > '9') return std::nullopt;
    frac += (v[i] - '0') * scale;
    scale /= 10;
  }
  if (whole == 1 && frac != 0) return std::nullopt;
  return whole * 1000 + frac;
}

std::optional<MediaRange> parse_media_range(std::string_view element, size_t position) {
  auto params = split_unquoted(element, ';');
  std::string_view range = trim(params[0]);
  size_t slash = range.find('/');
  if (slash == std::string_view::npos) return std::nullopt;
  std::string_view type = range.substr(0, slash);
  std::string_view subtype = range.substr(slash + 1);
  if (!is_token(type) || !is_token(subtype)) return std::nullopt;
  if (type == "*" && subtype != "*") return std::nullopt;

  MediaRange out{lower(type), lower(subtype), 1000, position};
  for (size_t i = 1; i < params.size(); ++i) {
    std::string_view p = trim(params[i]);
    size_t eq = p.find('=');
    if (eq == std::string_view::npos) {
      if (p.empty()) continue;  // tolerate "a/b;" and "a/b; ;"
      return std::nullopt;
    }
    std::string_view name = trim(p.substr(0, eq));
    std::string_view value = trim(p.substr(eq + 1));
    if (!iequals(name, "q")) continue;  // other parameters do not affect our types
    auto q = parse_qvalue(value);
    if (!q) return std::nullopt;
    out.q_millis = *q;
    break;  // parameters after q are accept-extensions (RFC 7231); ignore them
  }
  return out;
}

struct Candidate {
  Encoding encoding;
  int q_millis;
  bool named;
  size_t position;
};

// Higher is better: q first, then named beats wildcard, then earlier named position,
// then (wildcard-only) the enum order f32 > f16 > q8 > i8.
bool better(const Candidate& a, const Candidate& b) {
  if (a.q_millis != b.q_millis) return a.q_millis > b.q_millis;
  if (a.named != b.named) return a.named;
  if (a.named) return a.position < b.position;
  return static_cast<int>(a.encoding) < static_cast<int>(b.encoding);
}

}  // namespace

std::vector<MediaRange> parse_accept(std::string_view header_value) {
  std::vector<MediaRange> ranges;
  size_t position = 0;
  for (std::string_view element : split_unquoted(header_value, ',')) {
    if (trim(element).empty()) continue;  // "a/b, , c/d" is legal list syntax
    if (auto range = parse_media_range(element, position)) ranges.push_back(std::move(*range));
    ++position;
  }
  return ranges;
}

Encoding negotiate_response_encoding(std::string_view accept, EncodingSet offered) {
  auto ranges = parse_accept(accept);
  const MediaRange* any_application = nullptr;
  const MediaRange* any_type = nullptr;
  for (const auto& r : ranges) {
    if (r.type == "application" && r.subtype == "*" && !any_application) any_application = &r;
    if (r.type == "*" && !any_type) any_type = &r;
  }

  std::optional<Candidate> best;
  for (const EncodingInfo& info : kEncodings) {
    const Encoding e = info.encoding;
    if (e != Encoding::f32 && !offered.contains(e)) continue;
    std::string_view ct = info.content_type;
    std::string_view subtype = ct.substr(ct.find('/') + 1);

    const MediaRange* named = nullptr;
    for (const auto& r : ranges) {
      if (r.type == "application" && r.subtype == subtype) {
        named = &r;
        break;
      }
    }
    const MediaRange* match = named ? named : (any_application ? any_application : any_type);
    if (!match || match->q_millis == 0) continue;
    Candidate c{e, match->q_millis, named != nullptr, match->position};
    if (!best || better(c, *best)) best = c;
  }
  return best ? best->encoding : Encoding::f32;
}

}  // namespace larql::wire
