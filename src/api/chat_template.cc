#include "api/chat_template.h"

#include <algorithm>

#include "api/gemma4_chat.h"
#include "api/harmony.h"
#include "api/jinja_values.h"
#include "api/python_json.h"
#include "constrain/gemma4_syntax.h"

namespace larql {
namespace {

using jinja::trim;

// The system message (if first) and the rest.
std::pair<std::optional<std::string>, std::vector<ChatMessage>> split_system(const std::vector<ChatMessage>& messages) {
  if (!messages.empty() && messages[0].role == "system")
    return {messages[0].content, std::vector<ChatMessage>(messages.begin() + 1, messages.end())};
  return {std::nullopt, messages};
}

// A Llama 3 turn's opening: <|start_header_id|>role<|end_header_id|>\n\n (then its text and <|eot_id|>).
std::string llama3_header(std::string_view role) { return "<|start_header_id|>" + std::string(role) + "<|end_header_id|>\n\n"; }

// Llama 3: one turn per message, its content trimmed.
std::string render_llama3(const std::vector<ChatMessage>& messages) {
  std::string out;
  for (const auto& m : messages) out += llama3_header(m.role) + trim(m.content) + "<|eot_id|>";
  return out + llama3_header("assistant");
}

// Llama 3.1's template with tools (its defaults: tools in the first user message, date
// 26 Jul 2024): the system turn says ipython and the dates, the definitions (indented JSON)
// open the first user message, a call is the whole assistant turn as
// {"name": …, "parameters": …}, and a result is an ipython turn, JSON-encoded (the template
// tojson's any content).
Result<std::string> render_llama31_tools(const std::vector<ChatMessage>& messages, const std::vector<nlohmann::ordered_json>& tools) {
  auto [system, rest] = split_system(messages);
  std::string out = llama3_header("system") + std::string(tools.empty() ? "" : "Environment: ipython\n") +
                    "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n" + trim(system.value_or("")) + "<|eot_id|>";
  size_t next = 0;
  if (!tools.empty()) {
    if (rest.empty() || rest[0].role != "user")
      return make_error(ErrorCode::invalid_argument, "the llama3 format puts tools in the first user message; there is none");
    out += llama3_header("user") + "Given the following functions, please respond with a JSON for a function "
           "call with its proper arguments that best answers the given prompt.\n\nRespond in the format {\"name\": function "
           "name, \"parameters\": dictionary of argument name and its value}.Do not use variables.\n\n";
    for (const auto& t : tools) out += python_json(t, 4) + "\n\n";
    out += trim(rest[0].content) + "<|eot_id|>";
    next = 1;
  }
  for (size_t i = next; i < rest.size(); ++i) {
    const ChatMessage& m = rest[i];
    if (!m.tool_calls.empty()) {
      if (m.tool_calls.size() != 1)
        return make_error(ErrorCode::invalid_argument, "the llama3 format takes one tool call per assistant message");
      const auto arguments = nlohmann::ordered_json::parse(m.tool_calls[0].arguments, nullptr, false);
      out += llama3_header("assistant") + "{\"name\": \"" + m.tool_calls[0].name + "\", \"parameters\": " +
             python_json(arguments) + "}<|eot_id|>";
    } else if (m.role == "tool") {
      out += llama3_header("ipython") + python_json(nlohmann::ordered_json(m.content)) + "<|eot_id|>";
    } else {
      out += llama3_header(m.role) + trim(m.content) + "<|eot_id|>";
    }
  }
  return out + llama3_header("assistant");
}

// ChatML (Qwen): <|im_start|>role\ncontent<|im_end|>\n per message. With tools, Qwen 3's
// template: the definitions in the system turn (after the system text), the assistant's
// calls as <tool_call> blocks after its text, consecutive tool results in one user turn.
std::string render_chatml(const std::vector<ChatMessage>& messages, const std::vector<nlohmann::ordered_json>& tools) {
  std::string out;
  size_t first = 0;
  if (!tools.empty()) {
    out += "<|im_start|>system\n";
    if (messages[0].role == "system") {
      out += messages[0].content + "\n\n";
      first = 1;
    }
    out += "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
           "You are provided with function signatures within <tools></tools> XML tags:\n<tools>";
    for (const auto& t : tools) out += "\n" + python_json(t);
    out += "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
           "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
           "<args-json-object>}\n</tool_call><|im_end|>\n";
  }
  for (size_t i = first; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "tool") {
      if (i == 0 || messages[i - 1].role != "tool") out += "<|im_start|>user";
      out += "\n<tool_response>\n" + m.content + "\n</tool_response>";
      if (i + 1 == messages.size() || messages[i + 1].role != "tool") out += "<|im_end|>\n";
      continue;
    }
    out += "<|im_start|>" + m.role + "\n" + m.content;
    for (size_t k = 0; k < m.tool_calls.size(); ++k) {
      if (k > 0 || !m.content.empty()) out += "\n";
      out += "<tool_call>\n{\"name\": \"" + m.tool_calls[k].name + "\", \"arguments\": " + m.tool_calls[k].arguments + "}\n</tool_call>";
    }
    out += "<|im_end|>\n";
  }
  return out + "<|im_start|>assistant\n";
}

// Llama 2 / Mistral: [INST] user [/INST] answer</s>[INST] …; a system message opens the
// first user turn (Llama 2's <<SYS>> block). BOS only once, at the start.
Result<std::string> render_llama2(const std::vector<ChatMessage>& messages) {
  auto [system, rest] = split_system(messages);
  std::string out;
  bool first_user = true;
  for (const auto& m : rest) {
    if (m.role == "user") {
      out += "[INST] ";
      if (first_user && system) out.append("<<SYS>>\n").append(trim(*system)).append("\n<</SYS>>\n\n");
      first_user = false;
      out.append(trim(m.content)).append(" [/INST]");
    } else if (m.role == "assistant") {
      out.append(" ").append(trim(m.content)).append("</s>");
    } else {
      return make_error(ErrorCode::invalid_argument, "the llama2 chat format has no role '" + m.role + "' after the first message");
    }
  }
  return out;
}

// Gemma 2/3: <start_of_turn>user\n…<end_of_turn>\n, the assistant's role is "model", the
// system text opens the first user turn followed by a blank line (Gemma 3's template).
Result<std::string> render_gemma(const std::vector<ChatMessage>& messages) {
  auto [system, rest] = split_system(messages);
  std::string out;
  bool first = true;
  for (const auto& m : rest) {
    if (m.role != "user" && m.role != "assistant")
      return make_error(ErrorCode::invalid_argument, "the gemma chat format has no role '" + m.role + "' after the first message");
    std::string content = trim(m.content);
    if (first && system) content = trim(*system) + "\n\n" + content;
    first = false;
    out += "<start_of_turn>" + std::string(m.role == "assistant" ? "model" : "user") + "\n" + content + "<end_of_turn>\n";
  }
  return out + "<start_of_turn>model\n";
}

}  // namespace

std::vector<std::string_view> ToolCallWords::marks() const {
  std::vector<std::string_view> out;
  auto add = [&](std::string_view m) {
    if (std::find(out.begin(), out.end(), m) == out.end()) out.push_back(m);
  };
  // Tags like <|channel|>, <|tool_call> or <tool_call|> (not <tool_call>: Qwen's is text).
  for (std::string_view words : {before, between, after, open, close})
    for (size_t at = words.find('<'); at != std::string_view::npos; at = words.find('<', at + 1)) {
      const size_t end = words.find('>', at);
      if (end == std::string_view::npos) break;
      const std::string_view tag = words.substr(at, end - at + 1);
      if (tag.size() > 3 && tag.find(' ') == std::string_view::npos && (tag[1] == '|' || tag[tag.size() - 2] == '|')) add(tag);
    }
  if (syntax == ValueSyntax::gemma4) add(kGemma4Quote);
  return out;
}

const ChatFormatInfo& chat_format_info(ChatFormat f) {
  for (const auto& info : kChatFormats)
    if (info.format == f) return info;
  return kChatFormats[0];
}

std::optional<ChatFormat> find_chat_format(std::string_view name) {
  for (const auto& info : kChatFormats)
    if (info.name == name) return info.format;
  return std::nullopt;
}

std::optional<ChatFormat> detect_chat_format(std::string_view template_text) {
  for (const auto& info : kChatFormats)
    if (template_text.find(info.marker) != std::string_view::npos) return info.format;
  return std::nullopt;
}

Result<std::string> render_chat(ChatFormat format, const std::vector<ChatMessage>& messages,
                                const std::vector<nlohmann::ordered_json>& tools) {
  if (messages.empty()) return make_error(ErrorCode::invalid_argument, "messages is empty");
  const bool with_tools = chat_format_info(format).tool_call.supported();
  if (!tools.empty() && !with_tools)
    return make_error(ErrorCode::invalid_argument, "tools are not supported with the " + std::string(chat_format_info(format).name) +
                                                       " chat format (larql has tool calls for chatml, llama3 and gemma4)");
  if (format == ChatFormat::harmony) return render_harmony(messages, harmony_today(), tools);  // its own roles
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& role = messages[i].role;
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (role != "system" && role != "user" && role != "assistant" && !(role == "tool" && with_tools))
      return make_error(ErrorCode::invalid_argument, where + ".role is '" + role + "'; expected system, user, assistant" +
                                                         (with_tools ? " or tool" : ""));
    if (role == "system" && i != 0)
      return make_error(ErrorCode::invalid_argument, where + ": a system message must come first");
    if (!messages[i].tool_calls.empty() && !with_tools)
      return make_error(ErrorCode::invalid_argument, where + ".tool_calls: the " + std::string(chat_format_info(format).name) +
                                                         " chat format has no tool calls in larql");
  }
  const bool tool_turns = std::any_of(messages.begin(), messages.end(), [](const ChatMessage& m) {
    return m.role == "tool" || !m.tool_calls.empty();
  });
  switch (format) {
    case ChatFormat::llama3:
      if (!tools.empty() || tool_turns) return render_llama31_tools(messages, tools);
      return render_llama3(messages);
    case ChatFormat::chatml: return render_chatml(messages, tools);
    case ChatFormat::llama2: return render_llama2(messages);
    case ChatFormat::gemma: return render_gemma(messages);
    case ChatFormat::gemma4: return render_gemma4(messages, tools);
    case ChatFormat::harmony: break;  // above
  }
  return make_error(ErrorCode::invalid_argument, "unknown chat format");
}

}  // namespace larql
