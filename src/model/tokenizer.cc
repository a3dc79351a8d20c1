#include "model/tokenizer.h"

#include "model/utf8.h"

namespace larql {

TextStream::TextStream(const Tokenizer& tokenizer, int context) : tokenizer_(tokenizer), window_{context} {
  emitted_ = tokenizer_.decode(window_).size();
}

namespace {

bool ends_with_replacement(const std::string& text) {
  const auto& r = utf8::kReplacementChar;
  return text.size() >= r.size() && text.compare(text.size() - r.size(), std::string::npos, r) == 0;
}

}  // namespace

std::string TextStream::push(int token) {
  window_.push_back(token);
  const std::string text = tokenizer_.decode(window_);
  if (ends_with_replacement(text)) return {};  // a character still incomplete: hold it
  std::string out = text.size() > emitted_ ? text.substr(emitted_) : std::string();
  emitted_ = text.size();
  // Keep decoding proportional to a few tokens: restart the window at a recent token that
  // decodes cleanly on its own (not a lone byte of a longer character), keeping at least
  // one token of context before the newest so start-of-text rules (a stripped leading
  // space) only ever apply to text already emitted.
  if (window_.size() > 16) {
    for (size_t start = window_.size() - 2; start > 0; --start) {
      const int first = window_[start];
      if (tokenizer_.token_text(first).find(utf8::kReplacementChar) != std::string::npos) continue;
      window_.erase(window_.begin(), window_.begin() + std::ptrdiff_t(start));
      emitted_ = tokenizer_.decode(window_).size();
      break;
    }
  }
  return out;
}

std::string TextStream::finish() {
  const std::string text = tokenizer_.decode(window_);
  std::string out = text.size() > emitted_ ? text.substr(emitted_) : std::string();
  emitted_ = text.size();
  return out;
}

}  // namespace larql
