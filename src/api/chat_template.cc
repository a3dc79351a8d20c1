#include "api/chat_template.h"

#include "api/harmony.h"

namespace larql {
namespace {

std::string trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t\n\r");
  if (first == std::string_view::npos) return {};
  const auto last = s.find_last_not_of(" \t\n\r");
  return std::string(s.substr(first, last - first + 1));
}

// The system message (if first) and the rest.
std::pair<std::optional<std::string>, std::vector<ChatMessage>> split_system(const std::vector<ChatMessage>& messages) {
  if (!messages.empty() && messages[0].role == "system")
    return {messages[0].content, std::vector<ChatMessage>(messages.begin() + 1, messages.end())};
  return {std::nullopt, messages};
}

// Llama 3: <|start_header_id|>role<|end_header_id|>\n\ncontent<|eot_id|> per message.
std::string render_llama3(const std::vector<ChatMessage>& messages) {
  std::string out;
  for (const auto& m : messages) out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + trim(m.content) + "<|eot_id|>";
  return out + "<|start_header_id|>assistant<|end_header_id|>\n\n";
}

// ChatML (Qwen): <|im_start|>role\ncontent<|im_end|>\n per message.
std::string render_chatml(const std::vector<ChatMessage>& messages) {
  std::string out;
  for (const auto& m : messages) out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
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

// Gemma 4: <|turn>role\n…<turn|>\n with a system turn of its own; thinking off, the
// generation prompt closes an empty thought channel.
std::string render_gemma4(const std::vector<ChatMessage>& messages) {
  std::string out;
  for (const auto& m : messages)
    out += "<|turn>" + std::string(m.role == "assistant" ? "model" : m.role) + "\n" + trim(m.content) + "<turn|>\n";
  return out + "<|turn>model\n<|channel>thought\n<channel|>";
}

}  // namespace

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

Result<std::string> render_chat(ChatFormat format, const std::vector<ChatMessage>& messages) {
  if (messages.empty()) return make_error(ErrorCode::invalid_argument, "messages is empty");
  if (format == ChatFormat::harmony) return render_harmony(messages, harmony_today());  // its own roles
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& role = messages[i].role;
    if (role != "system" && role != "user" && role != "assistant")
      return make_error(ErrorCode::invalid_argument, "messages[" + std::to_string(i) + "].role is '" + role +
                                                         "'; expected system, user or assistant");
    if (role == "system" && i != 0)
      return make_error(ErrorCode::invalid_argument, "messages[" + std::to_string(i) + "]: a system message must come first");
  }
  switch (format) {
    case ChatFormat::llama3: return render_llama3(messages);
    case ChatFormat::chatml: return render_chatml(messages);
    case ChatFormat::llama2: return render_llama2(messages);
    case ChatFormat::gemma: return render_gemma(messages);
    case ChatFormat::gemma4: return render_gemma4(messages);
    case ChatFormat::harmony: break;  // above
  }
  return make_error(ErrorCode::invalid_argument, "unknown chat format");
}

}  // namespace larql
