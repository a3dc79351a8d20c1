#include "api/harmony.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <ctime>

#include <nlohmann/json.hpp>

#include "api/jinja_values.h"
#include "api/python_json.h"

namespace larql {
namespace {

constexpr std::string_view kChannel = "<|channel|>", kMessage = "<|message|>";
constexpr std::array<std::string_view, 3> kMessageEnds = {"<|end|>", "<|return|>", "<|call|>"};
constexpr size_t kLongestHeader = 256;  // "commentary to=functions.NAME <|constrain|>json", with room

// The length of the longest tail of `text` that begins one of `markers` (a marker that may
// be completed by the next push).
size_t partial_marker_tail(std::string_view text, std::initializer_list<std::string_view> markers) {
  size_t longest = 0;
  for (std::string_view m : markers)
    for (size_t n = std::min(text.size(), m.size() - 1); n > longest; --n)
      if (text.substr(text.size() - n) == m.substr(0, n)) {
        longest = n;
        break;
      }
  return longest;
}

using json = nlohmann::ordered_json;

using jinja::member;
using jinja::truthy;

// Jinja's `~`/`+` of a value into text: strings as they are, others as Python prints them.
std::string text_of(const json& v) { return v.is_string() ? v.get<std::string>() : python_json(v); }

bool listed(const json& names, const std::string& name) {
  return names.is_array() && std::any_of(names.begin(), names.end(), [&](const json& n) { return n == name; });
}

// The template's render_typescript_type (its whitespace included: transformers renders
// with trim_blocks and lstrip_blocks).
std::string typescript_type(const json& spec, size_t depth) {
  if (depth > 32) return "any";
  const json& type = member(spec, "type");
  const bool nullable = truthy(member(spec, "nullable"));
  if (type == "array") {
    const json& items = member(spec, "items");
    if (!truthy(items)) return std::string("any[]") + (nullable ? " | null" : "");
    const json& item_type = member(items, "type");
    std::string out;
    if (item_type == "string") out = "string[]";
    else if (item_type == "number" || item_type == "integer") out = "number[]";
    else if (item_type == "boolean") out = "boolean[]";
    else {
      const std::string inner = typescript_type(items, depth + 1);
      out = inner == "object | object" || inner.size() > 50 ? "any[]" : inner + "[]";
    }
    return out + (nullable ? " | null" : "");
  }
  if (type.is_array() && !type.empty()) {
    std::string out;
    for (size_t i = 0; i < type.size(); ++i) out += (i ? " | " : "") + text_of(type[i]);
    return out;
  }
  if (truthy(member(spec, "oneOf"))) {
    // (The template's test for object variants sets a variable inside its loop, which Jinja
    // scopes to the loop: the variants are always written.)
    const json& variants = member(spec, "oneOf");
    std::string out;
    for (size_t i = 0; i < variants.size(); ++i) {
      out += typescript_type(variants[i], depth + 1);
      if (truthy(member(variants[i], "description"))) out += "// " + text_of(member(variants[i], "description"));
      if (variants[i].is_object() && variants[i].contains("default"))
        out += std::string(20, ' ') + "// default: " + python_json(variants[i]["default"]);
      if (i + 1 < variants.size()) out += " | \n";
    }
    return out;
  }
  if (type == "string") {
    if (truthy(member(spec, "enum"))) {
      std::string out = "\"";
      const json& values = member(spec, "enum");
      for (size_t i = 0; i < values.size(); ++i) out += (i ? "\" | \"" : "") + text_of(values[i]);
      return out + "\"";
    }
    return std::string("string") + (nullable ? " | null" : "");
  }
  if (type == "number" || type == "integer") return "number";
  if (type == "boolean") return "boolean";
  if (type == "object") {
    const json& properties = member(spec, "properties");
    if (!truthy(properties)) return "object";
    std::string out = "{\n";
    size_t i = 0;
    for (const auto& [name, prop] : properties.items()) {
      out += name + (listed(member(spec, "required"), name) ? "" : "?") + ": " + "\n" + std::string(16, ' ') + typescript_type(prop, depth + 1);
      if (++i < properties.size()) out += ", ";
    }
    return out + "}";
  }
  return "any";
}

// The developer message's tool namespace (render_tool_namespace("functions", tools)).
std::string tool_namespace(const std::vector<json>& tools) {
  std::string out = "## functions\n\nnamespace functions {\n\n";
  for (const auto& tool : tools) {
    const json& f = member(tool, "function");
    out += "// " + text_of(member(f, "description")) + "\n" + "type " + text_of(member(f, "name")) + " = ";
    const json& params = member(f, "parameters");
    const json& properties = member(params, "properties");
    if (!truthy(params) || !truthy(properties)) {
      out += "() => any;\n\n";
      continue;
    }
    out += "(_: {\n";
    for (const auto& [name, spec] : properties.items()) {
      if (truthy(member(spec, "description"))) out += "// " + text_of(member(spec, "description")) + "\n";
      out += name + (listed(member(params, "required"), name) ? "" : "?") + ": " + typescript_type(spec, 0);
      if (spec.is_object() && spec.contains("default")) {
        const json& d = spec["default"];
        if (truthy(member(spec, "enum"))) out += ", // default: " + text_of(d);
        else if (truthy(member(spec, "oneOf"))) out += "// default: " + text_of(d);
        else out += ", // default: " + python_json(d);
      }
      out += ",\n";
    }
    out += "}) => any;\n\n";
  }
  return out + "} // namespace functions";
}

}  // namespace

std::string harmony_today() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm utc{};
  gmtime_r(&now, &utc);
  char buf[16];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", &utc);
  return buf;
}

Result<std::string> render_harmony(const std::vector<ChatMessage>& messages, std::string_view date, const std::vector<json>& tools) {
  std::string out = "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n"
                    "Knowledge cutoff: 2024-06\nCurrent date: " + std::string(date) +
                    "\n\nReasoning: medium\n\n# Valid channels: analysis, commentary, final. Channel must be included for every message.";
  if (!tools.empty()) out += "\nCalls to these tools must go to the commentary channel: 'functions'.";
  out += "<|end|>";
  size_t first = 0;
  std::string developer;
  if (!messages.empty() && (messages[0].role == "system" || messages[0].role == "developer")) developer = messages[0].content, first = 1;
  if (!developer.empty() || !tools.empty()) {
    out += "<|start|>developer<|message|>";
    if (!developer.empty()) out += "# Instructions\n\n" + developer + "\n\n";
    if (!tools.empty()) out += "# Tools\n\n" + tool_namespace(tools);
    out += "<|end|>";
  }
  std::string last_call;  // the function the latest assistant call went to (a tool message answers it)
  for (size_t i = first; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (m.role == "user") {
      out += "<|start|>user<|message|>" + m.content + "<|end|>";
    } else if (m.role == "assistant") {
      if (m.content.find("<|channel|>") != std::string::npos)
        return make_error(ErrorCode::invalid_argument, where + ".content holds <|channel|> tags; pass only the final message's text");
      if (m.tool_calls.empty()) {
        out += "<|start|>assistant<|channel|>final<|message|>" + m.content + "<|end|>";
        last_call.clear();
        continue;
      }
      if (m.tool_calls.size() != 1)
        return make_error(ErrorCode::invalid_argument, where + ".tool_calls: the harmony format takes one tool call per assistant message");
      // Text beside a call is its analysis, kept unless a later assistant message answers finally.
      const bool answered_later = std::any_of(messages.begin() + long(i) + 1, messages.end(),
                                              [](const ChatMessage& later) { return later.role == "assistant" && later.tool_calls.empty(); });
      if (!m.content.empty() && !answered_later) out += "<|start|>assistant<|channel|>analysis<|message|>" + m.content + "<|end|>";
      const ChatToolCall& call = m.tool_calls[0];
      const json arguments = json::parse(call.arguments, nullptr, false);
      out += "<|start|>assistant to=functions." + call.name + "<|channel|>commentary json<|message|>" +
             (arguments.is_discarded() ? python_json(call.arguments) : python_json(arguments)) + "<|call|>";
      last_call = call.name;
    } else if (m.role == "tool") {
      if (last_call.empty())
        return make_error(ErrorCode::invalid_argument, where + ".role is 'tool', but no assistant tool call comes before it");
      out += "<|start|>functions." + last_call + " to=assistant<|channel|>commentary<|message|>" + python_json(m.content) + "<|end|>";
    } else {
      return make_error(ErrorCode::invalid_argument,
                        where + ".role is '" + m.role + "'; the harmony format takes " +
                            (m.role == "system" || m.role == "developer" ? "a system or developer message only first"
                                                                         : "system or developer (first), user, assistant and tool"));
    }
  }
  return out + "<|start|>assistant";
}

HarmonyChannels::Text HarmonyChannels::push(std::string_view text) {
  held_ += text;
  Text out;
  for (;;) {
    if (state_ == State::outside) {
      const size_t at = held_.find(kChannel);
      if (at == std::string::npos) {  // a role header or stray text: kept (bounded) for its recipient
        const size_t keep = partial_marker_tail(held_, {kChannel});
        role_header_ += held_.substr(0, held_.size() - keep);
        if (role_header_.size() > kLongestHeader) role_header_.erase(0, role_header_.size() - kLongestHeader);
        held_.erase(0, held_.size() - keep);
        return out;
      }
      role_header_ += held_.substr(0, at);
      held_.erase(0, at + kChannel.size());
      state_ = State::header;
    }
    if (state_ == State::header) {  // "final", or "commentary to=functions.f <|constrain|>json"
      const size_t at = held_.find(kMessage);
      if (at == std::string::npos) {
        if (held_.size() > kLongestHeader) held_.clear(), role_header_.clear(), state_ = State::outside;  // not a header after all
        return out;
      }
      channel_ = held_.substr(0, std::min(at, held_.find_first_of(" <")));
      // The recipient, in the role header or the channel's: "to=functions.NAME".
      const std::string header = role_header_ + " " + held_.substr(0, at);
      constexpr std::string_view kTo = "to=functions.";
      function_.clear();
      if (const size_t to = header.find(kTo); to != std::string::npos) {
        const size_t begin = to + kTo.size();
        function_ = header.substr(begin, header.find_first_of(" <", begin) - begin);
      }
      arguments_.clear();
      role_header_.clear();
      held_.erase(0, at + kMessage.size());
      state_ = State::message;
    }
    size_t end = std::string::npos, end_size = 0;
    for (std::string_view m : kMessageEnds)
      if (const size_t at = held_.find(m); at < end) end = at, end_size = m.size();
    if (end == std::string::npos) {
      const size_t keep = partial_marker_tail(held_, {kMessageEnds[0], kMessageEnds[1], kMessageEnds[2]});
      take(std::string_view(held_).substr(0, held_.size() - keep), out);
      held_.erase(0, held_.size() - keep);
      return out;
    }
    take(std::string_view(held_).substr(0, end), out);
    held_.erase(0, end + end_size);
    end_message(out);
  }
}

void HarmonyChannels::take(std::string_view text, Text& out) {
  if (!function_.empty()) arguments_ += text;
  else if (channel_ == "final") out.content += text;
  else if (channel_ == "analysis") out.reasoning += text;
}

// A message to a function is a call: its arguments compact when they are JSON, else as written.
void HarmonyChannels::end_message(Text& out) {
  if (!function_.empty()) {
    const auto arguments = nlohmann::json::parse(arguments_, nullptr, false);
    out.calls.push_back({function_, arguments.is_discarded() ? arguments_ : arguments.dump()});
  }
  function_.clear();
  arguments_.clear();
  state_ = State::outside;
}

HarmonyChannels::Text HarmonyChannels::finish() {
  Text out;
  if (state_ == State::message) {
    take(held_, out);
    end_message(out);
  }
  held_.clear();
  role_header_.clear();
  state_ = State::outside;
  return out;
}

}  // namespace larql
