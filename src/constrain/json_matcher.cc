#include "constrain/json_matcher.h"

#include <algorithm>
#include <limits>
#include <optional>

#include "constrain/gemma4_syntax.h"

namespace larql {

namespace {

constexpr size_t kInfinite = size_t{1} << 40;
// Numbers every JSON parser keeps: at most 32 bytes, an exponent of at most two digits (no
// overflow to infinity), and integers of at most 15 digits (exact in a double, so in
// JavaScript too).
constexpr uint32_t kMaxNumberBytes = 32;
constexpr uint8_t kMaxExponentDigits = 2;
constexpr uint32_t kMaxIntegerDigits = 15;

size_t add(size_t a, size_t b) { return std::min(kInfinite, a + b); }

bool is_space(uint8_t b) { return b == ' ' || b == '\n' || b == '\t' || b == '\r'; }
bool is_digit(uint8_t b) { return b >= '0' && b <= '9'; }
bool is_hex(uint8_t b) { return is_digit(b) || (b >= 'a' && b <= 'f') || (b >= 'A' && b <= 'F'); }

// Object phases: after "{", after ",", inside a key, before ":", before the value, after it.
enum ObjectPhase : uint8_t { o_first, o_next, o_key, o_colon, o_value, o_after };
enum ArrayPhase : uint8_t { a_first, a_next, a_after };
// s_open: Gemma 4's opening <|"|> mark, its bytes matched in aux.
enum StringPhase : uint8_t { s_body, s_escape, s_unicode, s_utf8, s_open };
enum NumberPhase : uint8_t { n_minus, n_zero, n_int, n_dot, n_frac, n_e, n_esign, n_exp };
enum WrappedPhase : uint8_t { w_prefix, w_value, w_suffix };

// A frame's whitespace gap: spaces and tabs in the low bits, then two flags.
constexpr uint8_t kIndent = 0x3F, kBreak = 0x40, kReturn = 0x80;

bool number_complete(uint8_t phase) { return phase == n_zero || phase == n_int || phase == n_frac || phase == n_exp; }

uint32_t byte_range(uint8_t lo, uint8_t hi) { return uint32_t(lo) << 8 | hi; }

}  // namespace

JsonMatcher& JsonMatcher::operator=(const JsonMatcher& other) {
  grammar_ = other.grammar_;
  depth_ = other.depth_;
  done_ = other.done_;
  std::copy(other.frames_.begin(), other.frames_.begin() + depth_, frames_.begin());
  return *this;
}

bool JsonMatcher::feed(std::string_view bytes) {
  for (char c : bytes)
    if (!feed(uint8_t(c))) return false;
  return true;
}

bool JsonMatcher::feed(uint8_t byte) {
  for (;;) {
    if (done_) return false;
    if (depth_ == 0) return begin_value(grammar_->root(), byte);
    switch (step(frames_[depth_ - 1], byte)) {
      case Step::consumed: return true;
      case Step::rejected: return false;
      case Step::passed: break;  // a number or literal ended before this byte: its parent takes it
    }
  }
}

bool JsonMatcher::begin_value(uint32_t node, uint8_t byte) {
  // An alternative (or any value) is chosen by the first byte.
  for (;;) {
    const SchemaNode& n = grammar_->node(node);
    if (!JsonGrammar::starts(n, byte)) return false;
    if (n.kind == SchemaKind::any_of) {
      node = *std::find_if(n.alternatives.begin(), n.alternatives.end(),
                           [&](uint32_t a) { return JsonGrammar::starts(grammar_->node(a), byte); });
      continue;
    }
    if (n.kind == SchemaKind::any) {
      switch (byte) {
        case '{': node = grammar_->any_object_node(); break;
        case '[': node = grammar_->any_array(); break;
        case '"':
        case '<': node = grammar_->any_string(); break;  // JSON's quote, Gemma 4's <|"|>
        case 't': case 'f': case 'n': node = grammar_->any_literal(); break;
        default: node = grammar_->any_number(); break;
      }
      continue;
    }
    break;
  }
  if (depth_ == frames_.size()) return false;  // nested too deep
  Frame& f = frames_[depth_++];
  f = Frame{};
  f.node = node;
  const SchemaNode& n = grammar_->node(node);
  switch (n.kind) {
    case SchemaKind::object: f.phase = o_first; return true;
    case SchemaKind::array: f.phase = a_first; return true;
    case SchemaKind::string:
      f.phase = gemma() ? s_open : s_body;
      f.aux = 1;  // s_open: the mark's "<" (s_body ignores aux)
      if (!gemma()) f.aux = 0;
      return true;
    case SchemaKind::number:
    case SchemaKind::integer:
      f.phase = byte == '-' ? n_minus : byte == '0' ? n_zero : n_int;
      f.index = 1;
      f.count = byte == '-';
      return true;
    case SchemaKind::literals:
      f.set = (n.literals.size() == 64 ? ~uint64_t{0} : (uint64_t{1} << n.literals.size()) - 1);
      return literal_byte(f, n, byte) == Step::consumed;
    case SchemaKind::wrapped:
      f.set = (n.literals.size() == 64 ? ~uint64_t{0} : (uint64_t{1} << n.literals.size()) - 1);
      f.phase = w_prefix;
      return wrapped_byte(f, n, byte) == Step::consumed;
    case SchemaKind::any_of:
    case SchemaKind::any: break;
  }
  return false;
}

void JsonMatcher::end_value() {
  if (--depth_ == 0) done_ = true;
}

JsonMatcher::Step JsonMatcher::step(Frame& f, uint8_t byte) {
  const SchemaNode& n = grammar_->node(f.node);
  switch (n.kind) {
    case SchemaKind::object: return object_byte(f, n, byte);
    case SchemaKind::array: return array_byte(f, n, byte);
    case SchemaKind::string: return string_byte(f, n, byte);
    case SchemaKind::number:
    case SchemaKind::integer: return number_byte(f, n, byte);
    case SchemaKind::literals: return literal_byte(f, n, byte);
    case SchemaKind::wrapped: return wrapped_byte(f, n, byte);
    case SchemaKind::any_of:
    case SchemaKind::any: break;
  }
  return Step::rejected;
}

JsonMatcher::Step JsonMatcher::wrapped_byte(Frame& f, const SchemaNode& n, uint8_t byte) {
  switch (f.phase) {
    case w_prefix: {
      uint64_t kept = 0;
      for (uint64_t s = f.set; s; s &= s - 1) {
        const size_t i = size_t(__builtin_ctzll(s));
        if (n.literals[i].size() > f.index && uint8_t(n.literals[i][f.index]) == byte) kept |= uint64_t{1} << i;
      }
      if (!kept) return Step::rejected;
      f.set = kept;
      ++f.index;
      for (uint64_t s = kept; s; s &= s - 1) {
        const size_t i = size_t(__builtin_ctzll(s));
        if (n.literals[i].size() == f.index) {  // no opening is another's prefix: this one is chosen
          f.count = uint32_t(i);
          f.phase = w_value;
        }
      }
      return Step::consumed;
    }
    case w_value:
      f.phase = w_suffix;
      f.index = 0;
      return begin_value(n.alternatives[f.count], byte) ? Step::consumed : Step::rejected;
    case w_suffix:
      if (f.index >= n.suffix.size() || uint8_t(n.suffix[f.index]) != byte) return Step::rejected;
      if (++f.index == n.suffix.size()) end_value();
      return Step::consumed;
  }
  return Step::rejected;
}

// Whitespace in a gap between tokens: at most one line break (a \r only right before its
// \n) and kMaxIndent spaces or tabs. Any other byte ends the gap.
std::optional<JsonMatcher::Step> JsonMatcher::gap(Frame& f, uint8_t byte) {
  if (!is_space(byte)) {
    if (f.space & kReturn) return Step::rejected;  // a \r not followed by \n
    f.space = 0;
    return std::nullopt;
  }
  if (f.space & kReturn && byte != '\n') return Step::rejected;
  if (byte == '\n' || byte == '\r') {
    if (f.space & kBreak) return Step::rejected;
    f.space = byte == '\n' ? uint8_t((f.space & kIndent) | kBreak) : uint8_t(f.space | kReturn);
    return Step::consumed;
  }
  if ((f.space & kIndent) >= kMaxIndent) return Step::rejected;
  ++f.space;
  return Step::consumed;
}

bool JsonMatcher::start_key(Frame& f, const SchemaNode& n) {
  if (n.open && gemma()) {
    f.phase = o_key;
    f.count = 0;
    return true;
  }
  if (n.open) {
    f.phase = o_colon;
    return begin_value(grammar_->any_string(), '"');
  }
  // Candidates: the properties from the next one up to the first required one (a required
  // property cannot be skipped).
  uint64_t set = 0;
  for (size_t i = f.index, bit = 0; i < n.properties.size(); ++i, ++bit) {
    set |= uint64_t{1} << bit;
    if (n.properties[i].required) break;
  }
  if (set == 0) return false;
  f.set = set;
  f.count = 0;
  f.phase = o_key;
  return true;
}

JsonMatcher::Step JsonMatcher::object_byte(Frame& f, const SchemaNode& n, uint8_t byte) {
  switch (f.phase) {
    case o_first:
    case o_next:
      if (auto s = gap(f, byte)) return *s;
      if (byte == '}' && f.phase == o_first && (n.open || n.required_tail[f.index] == 0)) {
        end_value();
        return Step::consumed;
      }
      if (gemma()) {  // a bare key: this byte is its first
        if (!start_key(f, n)) return Step::rejected;
        return object_byte(f, n, byte);
      }
      if (byte == '"') return start_key(f, n) ? Step::consumed : Step::rejected;
      return Step::rejected;
    case o_key: {
      if (gemma() && n.open) {  // any bare key of at least one byte, up to ':'
        if (byte == ':' && f.count > 0) {
          f.phase = o_value;
          return Step::consumed;
        }
        if (!bare_key_byte(byte)) return Step::rejected;
        ++f.count;
        return Step::consumed;
      }
      if (byte == (gemma() ? ':' : '"')) {
        for (uint64_t s = f.set; s; s &= s - 1) {
          const size_t i = f.index + size_t(__builtin_ctzll(s));
          if (n.properties[i].key.size() == f.count) {
            f.count = uint32_t(i);
            f.index = uint32_t(i + 1);
            f.phase = gemma() ? o_value : o_colon;  // Gemma 4's key ends with its ':'
            return Step::consumed;
          }
        }
        return Step::rejected;
      }
      uint64_t kept = 0;
      for (uint64_t s = f.set; s; s &= s - 1) {
        const size_t bit = size_t(__builtin_ctzll(s));
        const std::string& key = n.properties[f.index + bit].key;
        if (key.size() > f.count && uint8_t(key[f.count]) == byte) kept |= uint64_t{1} << bit;
      }
      if (!kept) return Step::rejected;
      f.set = kept;
      ++f.count;
      return Step::consumed;
    }
    case o_colon:
      if (auto s = gap(f, byte)) return *s;
      if (byte != ':') return Step::rejected;
      f.phase = o_value;
      return Step::consumed;
    case o_value: {
      if (auto s = gap(f, byte)) return *s;
      f.phase = o_after;
      const uint32_t value = n.open ? grammar_->any_value() : n.properties[f.count].value;
      return begin_value(value, byte) ? Step::consumed : Step::rejected;
    }
    case o_after:
      if (auto s = gap(f, byte)) return *s;
      if (byte == ',' && (n.open || f.index < n.properties.size())) {
        f.phase = o_next;
        return Step::consumed;
      }
      if (byte == '}' && (n.open || n.required_tail[f.index] == 0)) {
        end_value();
        return Step::consumed;
      }
      return Step::rejected;
  }
  return Step::rejected;
}

JsonMatcher::Step JsonMatcher::array_byte(Frame& f, const SchemaNode& n, uint8_t byte) {
  if (auto s = gap(f, byte)) return *s;
  if (f.phase == a_after) {
    if (byte == ',' && f.index < n.max_items) {
      f.phase = a_next;
      return Step::consumed;
    }
    if (byte == ']' && f.index >= n.min_items) {
      end_value();
      return Step::consumed;
    }
    return Step::rejected;
  }
  if (byte == ']' && f.phase == a_first && n.min_items == 0) {
    end_value();
    return Step::consumed;
  }
  if (f.index >= n.max_items) return Step::rejected;
  ++f.index;
  f.phase = a_after;
  return begin_value(n.items, byte) ? Step::consumed : Step::rejected;
}

JsonMatcher::Step JsonMatcher::string_byte(Frame& f, const SchemaNode& n, uint8_t byte) {
  if (gemma()) return gemma_string_byte(f, n, byte);
  switch (f.phase) {
    case s_body:
      if (byte == '"') {
        if (f.index < n.min_length) return Step::rejected;
        end_value();
        return Step::consumed;
      }
      if (byte < 0x20 || f.index >= n.max_length) return Step::rejected;
      if (byte == '\\') {
        f.phase = s_escape;
        return Step::consumed;
      }
      return character_byte(f, byte);
    case s_utf8: return utf8_continuation(f, byte);
    case s_escape:
      if (byte == 'u') {
        f.phase = s_unicode;
        f.aux = 4;
        return Step::consumed;
      }
      if (byte != '"' && byte != '\\' && byte != '/' && byte != 'b' && byte != 'f' && byte != 'n' && byte != 'r' && byte != 't')
        return Step::rejected;
      ++f.index;
      f.phase = s_body;
      return Step::consumed;
    case s_unicode:
      if (!is_hex(byte)) return Step::rejected;
      if (--f.aux == 0) {
        ++f.index;
        f.phase = s_body;
      }
      return Step::consumed;
  }
  return Step::rejected;
}

// A character's first byte inside a string (neither a quote nor an escape): ASCII, or a
// UTF-8 lead byte with how many continuation bytes follow and the first one's range
// (which excludes overlong forms and surrogates).
JsonMatcher::Step JsonMatcher::character_byte(Frame& f, uint8_t byte) {
  if (byte < 0x80) {
    ++f.index;
    return Step::consumed;
  }
  if (byte >= 0xC2 && byte <= 0xDF) f.aux = 1, f.count = byte_range(0x80, 0xBF);
  else if (byte == 0xE0) f.aux = 2, f.count = byte_range(0xA0, 0xBF);
  else if (byte == 0xED) f.aux = 2, f.count = byte_range(0x80, 0x9F);
  else if (byte >= 0xE1 && byte <= 0xEF) f.aux = 2, f.count = byte_range(0x80, 0xBF);
  else if (byte == 0xF0) f.aux = 3, f.count = byte_range(0x90, 0xBF);
  else if (byte >= 0xF1 && byte <= 0xF3) f.aux = 3, f.count = byte_range(0x80, 0xBF);
  else if (byte == 0xF4) f.aux = 3, f.count = byte_range(0x80, 0x8F);
  else return Step::rejected;
  ++f.index;
  f.phase = s_utf8;
  return Step::consumed;
}

JsonMatcher::Step JsonMatcher::utf8_continuation(Frame& f, uint8_t byte) {
  if (byte < (f.count >> 8) || byte > (f.count & 0xFF)) return Step::rejected;
  f.count = byte_range(0x80, 0xBF);
  if (--f.aux == 0) f.phase = s_body;
  return Step::consumed;
}

// Gemma 4's strings: <|"|>, raw text (no escapes; line breaks and tabs allowed), <|"|>.
// In the body, aux counts the bytes of a closing mark matched so far; when the next byte
// breaks the mark they were text.
JsonMatcher::Step JsonMatcher::gemma_string_byte(Frame& f, const SchemaNode& n, uint8_t byte) {
  const std::string_view mark = kGemma4Quote;
  switch (f.phase) {
    case s_open:
      if (uint8_t(mark[f.aux]) != byte) return Step::rejected;
      if (++f.aux == mark.size()) f.phase = s_body, f.aux = 0;
      return Step::consumed;
    case s_utf8: return utf8_continuation(f, byte);
    case s_body:
      if (f.aux > 0) {
        if (uint8_t(mark[f.aux]) == byte) {
          if (++f.aux < mark.size()) return Step::consumed;
          if (f.index < n.min_length) return Step::rejected;
          end_value();
          return Step::consumed;
        }
        f.index += f.aux;  // the mark's start was text
        f.aux = 0;
        if (f.index > n.max_length) return Step::rejected;
      }
      if (byte == '<') {  // perhaps the closing mark: held until decided
        f.aux = 1;
        return Step::consumed;
      }
      if ((byte < 0x20 && byte != '\n' && byte != '\t' && byte != '\r') || f.index >= n.max_length) return Step::rejected;
      return character_byte(f, byte);
    default: return Step::rejected;
  }
}

JsonMatcher::Step JsonMatcher::number_byte(Frame& f, const SchemaNode& n, uint8_t byte) {
  const bool fractions = n.kind == SchemaKind::number;
  const uint8_t before = f.phase;
  uint8_t next = 0xFF;
  switch (before) {
    case n_minus: next = byte == '0' ? n_zero : (is_digit(byte) ? n_int : 0xFF); break;
    case n_zero:
    case n_int:
    case n_frac:
      if (is_digit(byte) && before != n_zero) next = before;
      else if (byte == '.' && fractions && before != n_frac) next = n_dot;
      else if ((byte == 'e' || byte == 'E') && fractions) next = n_e;
      break;
    case n_dot: next = is_digit(byte) ? n_frac : 0xFF; break;
    case n_e: next = (byte == '+' || byte == '-') ? n_esign : (is_digit(byte) ? n_exp : 0xFF); break;
    case n_esign: next = is_digit(byte) ? n_exp : 0xFF; break;
    case n_exp: next = is_digit(byte) ? n_exp : 0xFF; break;
  }
  if (next == n_exp && ++f.aux > kMaxExponentDigits) next = 0xFF;
  if (!fractions && next == n_int && f.index - f.count >= kMaxIntegerDigits) next = 0xFF;  // count: the sign
  if (next != 0xFF && f.index < kMaxNumberBytes) {
    f.phase = next;
    ++f.index;
    return Step::consumed;
  }
  if (!number_complete(before)) return Step::rejected;
  end_value();
  return Step::passed;
}

JsonMatcher::Step JsonMatcher::literal_byte(Frame& f, const SchemaNode& n, uint8_t byte) {
  uint64_t kept = 0;
  bool complete = false;  // a candidate ends before this byte
  for (uint64_t s = f.set; s; s &= s - 1) {
    const size_t i = size_t(__builtin_ctzll(s));
    const std::string& text = n.literals[i];
    if (text.size() == f.index) complete = true;
    else if (uint8_t(text[f.index]) == byte) kept |= uint64_t{1} << i;
  }
  if (!kept) {
    if (!complete) return Step::rejected;
    end_value();
    return Step::passed;
  }
  f.set = kept;
  ++f.index;
  // Ended, with nothing longer left to match: the value is closed now, not at the next byte.
  bool longer = false;
  for (uint64_t s = kept; s; s &= s - 1)
    if (n.literals[size_t(__builtin_ctzll(s))].size() > f.index) longer = true;
  if (!longer) end_value();
  return Step::consumed;
}

bool JsonMatcher::accepting() const {
  if (done_) return true;
  if (depth_ != 1) return false;
  const Frame& f = frames_[0];
  const SchemaNode& n = grammar_->node(f.node);
  if (n.kind == SchemaKind::number || n.kind == SchemaKind::integer) return number_complete(f.phase);
  if (n.kind == SchemaKind::literals)
    for (uint64_t s = f.set; s; s &= s - 1)
      if (n.literals[size_t(__builtin_ctzll(s))].size() == f.index) return true;
  return false;
}

bool JsonMatcher::takes_plain_text(size_t chars) const {
  if (depth_ == 0 || done_) return false;
  const Frame& f = frames_[depth_ - 1];
  const SchemaNode& n = grammar_->node(f.node);
  // (Gemma 4: the start of a closing mark held in aux becomes text when plain text follows.)
  const size_t held = gemma() ? f.aux : 0;
  return n.kind == SchemaKind::string && f.phase == s_body && chars + held <= n.max_length - std::min<size_t>(n.max_length, f.index);
}

size_t JsonMatcher::frame_to_close(const Frame& f) const {
  const SchemaNode& n = grammar_->node(f.node);
  switch (n.kind) {
    case SchemaKind::object: {
      if (n.open) {
        switch (f.phase) {
          case o_first:
          case o_after: return 1;
          case o_next: return gemma() ? 4 : 5;  // "":0} or a:0}
          case o_key: return gemma() ? (f.count > 0 ? 3 : 4) : 1;  // :0} after a bare key's first byte
          case o_colon: return 3;  // :0}
          case o_value: return 2;
          default: return 1;
        }
      }
      const auto& tail = n.required_tail;
      switch (f.phase) {
        case o_first: return std::max<size_t>(tail[f.index], 1);
        case o_next: return tail[f.index] > 0 ? tail[f.index] : add(n.shortest_entry_from[f.index], 1);
        case o_key: {
          size_t best = kInfinite;
          for (uint64_t s = f.set; s; s &= s - 1) {
            const size_t i = f.index + size_t(__builtin_ctzll(s));
            const auto& p = n.properties[i];
            if (p.key.size() < f.count) continue;
            const size_t key_rest = p.key.size() - f.count + (gemma() ? 1 : 2);  // the key's rest and '":' or ':'
            best = std::min(best, add(add(key_rest, grammar_->node(p.value).min_bytes), tail[i + 1] + 1));
          }
          return best;
        }
        case o_colon: return add(add(1, grammar_->node(n.properties[f.count].value).min_bytes), tail[f.index] + 1);
        case o_value: return add(grammar_->node(n.properties[f.count].value).min_bytes, tail[f.index] + 1);
        case o_after: return add(tail[f.index], 1);
      }
      return kInfinite;
    }
    case SchemaKind::array: {
      const size_t item = add(grammar_->node(n.items).min_bytes, 1);
      const size_t due = n.min_items > f.index ? n.min_items - f.index : 0;  // items still required
      if (f.phase == a_first) return due == 0 ? 1 : std::min(kInfinite, due * item);
      if (f.phase == a_after) return add(std::min(kInfinite, due * item), 1);
      return add(std::min(kInfinite, (due > 0 ? due - 1 : 0) * item), item);  // a_next: an item, then "]"
    }
    case SchemaKind::string: {
      const size_t due = n.min_length > f.index ? n.min_length - f.index : 0;
      if (gemma()) {
        const size_t mark = kGemma4Quote.size();
        if (f.phase == s_open) return mark - f.aux + due + mark;
        if (f.phase == s_utf8) return f.aux + due + mark;
        // A held mark start closes with the mark's rest, or once broken (a byte of text)
        // counts as text.
        if (f.aux == 0) return due + mark;
        return due == 0 ? mark - f.aux : std::max<size_t>(due > f.aux ? due - f.aux : 0, 1) + mark;
      }
      const size_t pending = f.phase == s_body ? 0 : f.phase == s_escape ? 1 : f.aux;
      return pending + due + 1;
    }
    case SchemaKind::number:
    case SchemaKind::integer: return number_complete(f.phase) ? 0 : 1;
    case SchemaKind::literals: {
      size_t best = kInfinite;
      for (uint64_t s = f.set; s; s &= s - 1) best = std::min(best, n.literals[size_t(__builtin_ctzll(s))].size() - f.index);
      return best;
    }
    case SchemaKind::wrapped: {
      if (f.phase == w_suffix) return n.suffix.size() - f.index;
      if (f.phase == w_value) return add(grammar_->node(n.alternatives[f.count]).min_bytes, n.suffix.size());
      size_t best = kInfinite;
      for (uint64_t s = f.set; s; s &= s - 1) {
        const size_t i = size_t(__builtin_ctzll(s));
        best = std::min(best, add(n.literals[i].size() - f.index + n.suffix.size(), grammar_->node(n.alternatives[i]).min_bytes));
      }
      return best;
    }
    case SchemaKind::any_of:
    case SchemaKind::any: break;
  }
  return kInfinite;
}

size_t JsonMatcher::bytes_to_close() const {
  if (done_) return 0;
  if (depth_ == 0) return grammar_->node(grammar_->root()).min_bytes;
  size_t total = 0;
  for (size_t d = 0; d < depth_; ++d) total = add(total, frame_to_close(frames_[d]));
  // A gap's \r must be followed by its \n (only the innermost frame can be in a gap).
  return add(total, frames_[depth_ - 1].space & kReturn ? 1 : 0);
}

}  // namespace larql
