#include "constrain/gemma4_syntax.h"

#include <algorithm>
#include <cctype>
#include <cstring>

#include <nlohmann/json.hpp>

namespace larql {

using json = nlohmann::ordered_json;

namespace {

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Reads one value at `at` (whitespace around it skipped), or fails.
class Reader {
 public:
  explicit Reader(std::string_view text) : text_(text) {}

  std::optional<json> whole() {
    auto v = value(0);
    skip_space();
    if (!v || at_ != text_.size()) return std::nullopt;
    return v;
  }

 private:
  static constexpr size_t kMaxDepth = 64;

  void skip_space() {
    while (at_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[at_]))) ++at_;
  }
  bool take(std::string_view s) {
    if (text_.substr(at_, s.size()) != s) return false;
    at_ += s.size();
    return true;
  }

  std::optional<std::string> quoted() {
    if (!take(kGemma4Quote)) return std::nullopt;
    const size_t end = text_.find(kGemma4Quote, at_);
    if (end == std::string_view::npos) return std::nullopt;
    std::string s(text_.substr(at_, end - at_));
    at_ = end + kGemma4Quote.size();
    return s;
  }

  std::optional<json> value(size_t depth) {
    if (depth > kMaxDepth) return std::nullopt;
    skip_space();
    if (at_ >= text_.size()) return std::nullopt;
    const char c = text_[at_];
    if (c == '<') {
      auto s = quoted();
      if (!s) return std::nullopt;
      return json(*s);
    }
    if (c == '{') return object(depth);
    if (c == '[') return array(depth);
    for (auto [word, v] : {std::pair<std::string_view, json>{"true", true}, {"false", false}, {"null", nullptr}, {"None", nullptr}})
      if (take(word)) return v;
    const size_t begin = at_;
    while (at_ < text_.size() && std::strchr("+-0123456789.eE", text_[at_]) && text_[at_] != '\0') ++at_;
    if (at_ == begin) return std::nullopt;
    json number = json::parse(text_.substr(begin, at_ - begin), nullptr, false);
    if (!number.is_number()) return std::nullopt;
    return number;
  }

  std::optional<json> object(size_t depth) {
    take("{");
    json out = json::object();
    skip_space();
    if (take("}")) return out;
    for (;;) {
      skip_space();
      std::string key;
      if (text_.substr(at_, kGemma4Quote.size()) == kGemma4Quote) {
        auto q = quoted();
        if (!q) return std::nullopt;
        key = *q;
      } else {
        const size_t end = text_.find_first_of(":}", at_);
        if (end == std::string_view::npos || end == at_) return std::nullopt;
        key = std::string(text_.substr(at_, end - at_));
        while (std::isspace(static_cast<unsigned char>(key.back()))) key.pop_back();  // not all space: skipped before
        at_ = end;
      }
      if (!take(":")) return std::nullopt;
      auto v = value(depth + 1);
      if (!v) return std::nullopt;
      out[key] = std::move(*v);
      skip_space();
      if (take("}")) return out;
      if (!take(",")) return std::nullopt;
    }
  }

  std::optional<json> array(size_t depth) {
    take("[");
    json out = json::array();
    skip_space();
    if (take("]")) return out;
    for (;;) {
      auto v = value(depth + 1);
      if (!v) return std::nullopt;
      out.push_back(std::move(*v));
      skip_space();
      if (take("]")) return out;
      if (!take(",")) return std::nullopt;
    }
  }

  std::string_view text_;
  size_t at_ = 0;
};

}  // namespace

std::vector<std::pair<std::string, const json*>> dictsorted(const json& object) {
  std::vector<std::pair<std::string, const json*>> items;
  for (const auto& [k, v] : object.items()) items.emplace_back(k, &v);
  std::stable_sort(items.begin(), items.end(), [](const auto& a, const auto& b) { return lower(a.first) < lower(b.first); });
  return items;
}

std::string gemma4_text(const json& value, bool quote_keys) {
  if (value.is_string()) return std::string(kGemma4Quote) + value.get<std::string>() + std::string(kGemma4Quote);
  if (value.is_boolean()) return value.get<bool>() ? "true" : "false";
  if (value.is_null()) return "None";  // Jinja prints Python's None
  if (value.is_object()) {
    const auto items = dictsorted(value);
    std::string out = "{";
    for (size_t i = 0; i < items.size(); ++i) {
      if (i) out += ",";
      out += quote_keys ? std::string(kGemma4Quote) + items[i].first + std::string(kGemma4Quote) : items[i].first;
      out += ":" + gemma4_text(*items[i].second, quote_keys);
    }
    return out + "}";
  }
  if (value.is_array()) {
    std::string out = "[";
    for (size_t i = 0; i < value.size(); ++i) out += (i ? "," : "") + gemma4_text(value[i], quote_keys);
    return out + "]";
  }
  return value.dump();
}

std::optional<std::string> gemma4_to_json(std::string_view text) {
  auto v = Reader(text).whole();
  if (!v) return std::nullopt;
  return v->dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace larql
