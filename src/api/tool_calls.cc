#include "api/tool_calls.h"

#include <nlohmann/json.hpp>

#include "constrain/gemma4_syntax.h"

namespace larql {
namespace {

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

// How much of the end of `text` could be the start of `tag` (held until it is decided).
size_t partial_tag_at_end(std::string_view text, std::string_view tag) {
  for (size_t n = std::min(text.size(), tag.size() - 1); n > 0; --n)
    if (text.substr(text.size() - n) == tag.substr(0, n)) return n;
  return 0;
}

}  // namespace

std::optional<ToolCall> parse_tool_call(std::string_view json_text) {
  const auto v = nlohmann::ordered_json::parse(json_text, nullptr, false);
  if (!v.is_object() || !v.contains("name") || !v["name"].is_string()) return std::nullopt;
  for (const char* key : {"arguments", "parameters"})
    if (v.contains(key) && v[key].is_object()) return ToolCall{v["name"].get<std::string>(), v[key].dump()};
  return std::nullopt;
}

std::optional<ToolCall> parse_gemma4_call(std::string_view text) {
  constexpr std::string_view kCall = "call:";
  if (text.substr(0, kCall.size()) != kCall) return std::nullopt;
  text.remove_prefix(kCall.size());
  const size_t brace = text.find('{');
  if (brace == 0 || brace == std::string_view::npos) return std::nullopt;
  auto arguments = gemma4_to_json(text.substr(brace));
  if (!arguments || (*arguments)[0] != '{') return std::nullopt;
  return ToolCall{std::string(text.substr(0, brace)), *arguments};
}

std::optional<ToolCall> ToolCallParser::parse(std::string_view block) const {
  return words_.syntax == ValueSyntax::gemma4 ? parse_gemma4_call(block) : parse_tool_call(block);
}

ToolCallParser::Out ToolCallParser::push(std::string_view text) {
  held_ += text;
  return take(false);
}

ToolCallParser::Out ToolCallParser::finish() { return take(true); }

ToolCallParser::Out ToolCallParser::take(bool at_end) {
  Out out;
  if (words_.open.empty()) {
    // The whole answer is the call when it starts with "{": held to the end, then read.
    const size_t first = held_.find_first_not_of(" \t\n\r");
    if (first != std::string::npos && held_[first] != '{' && !in_call_) {
      out.content = std::move(held_);
      held_.clear();
      return out;
    }
    if (first != std::string::npos) in_call_ = true;  // decided: a call or, if it does not parse, text
    if (!at_end) return out;
    if (auto call = parse(held_)) {
      out.calls.push_back(std::move(*call));
      called_ = true;
    } else {
      out.content = std::move(held_);
    }
    held_.clear();
    return out;
  }
  for (;;) {
    if (in_call_) {
      const size_t close = held_.find(words_.close);
      if (close == std::string::npos) {
        if (!at_end) return out;
        out.content += std::string(words_.open) + held_;  // an unclosed block stays text
        held_.clear();
        in_call_ = false;
        return out;
      }
      const std::string block = held_.substr(0, close);
      held_.erase(0, close + words_.close.size());
      in_call_ = false;
      if (auto call = parse(block)) {
        out.calls.push_back(std::move(*call));
        called_ = true;
        // Whitespace between blocks is not text.
        held_.erase(0, std::min(held_.size(), held_.find_first_not_of(" \t\n\r")));
      } else {
        out.content += std::string(words_.open) + block + std::string(words_.close);
      }
      continue;
    }
    const size_t open = held_.find(words_.open);
    if (open != std::string::npos) {
      // Text before the call, without the whitespace that separates them.
      size_t end = open;
      while (end > 0 && is_space(held_[end - 1])) --end;
      out.content += held_.substr(0, end);
      held_.erase(0, open + words_.open.size());
      in_call_ = true;
      continue;
    }
    // Pass on all but a possible opening tag's start and the whitespace before it.
    size_t keep = at_end ? 0 : partial_tag_at_end(held_, words_.open);
    size_t end = held_.size() - keep;
    if (!at_end || called_)
      while (end > 0 && is_space(held_[end - 1])) --end;
    out.content += held_.substr(0, end);
    held_.erase(0, end);
    if (at_end) held_.clear();
    return out;
  }
}

}  // namespace larql
