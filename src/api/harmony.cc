#include "api/harmony.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <ctime>

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

}  // namespace

std::string harmony_today() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm utc{};
  gmtime_r(&now, &utc);
  char buf[16];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", &utc);
  return buf;
}

Result<std::string> render_harmony(const std::vector<ChatMessage>& messages, std::string_view date) {
  std::string out = "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n"
                    "Knowledge cutoff: 2024-06\nCurrent date: " + std::string(date) +
                    "\n\nReasoning: medium\n\n# Valid channels: analysis, commentary, final. Channel must be included for every message.<|end|>";
  size_t first = 0;
  if (!messages.empty() && (messages[0].role == "system" || messages[0].role == "developer")) {
    if (!messages[0].content.empty())
      out += "<|start|>developer<|message|># Instructions\n\n" + messages[0].content + "\n\n<|end|>";
    first = 1;
  }
  for (size_t i = first; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "user") {
      out += "<|start|>user<|message|>" + m.content + "<|end|>";
    } else if (m.role == "assistant") {
      if (m.content.find("<|channel|>") != std::string::npos)
        return make_error(ErrorCode::invalid_argument, "messages[" + std::to_string(i) +
                                                           "].content holds <|channel|> tags; pass only the final message's text");
      out += "<|start|>assistant<|channel|>final<|message|>" + m.content + "<|end|>";
    } else {
      return make_error(ErrorCode::invalid_argument,
                        "messages[" + std::to_string(i) + "].role is '" + m.role + "'; the harmony format takes " +
                            (m.role == "system" || m.role == "developer" ? "a system or developer message only first"
                             : m.role == "tool" ? "tool messages only after an assistant's tool call, which larql does not send yet"
                                                : "system or developer (first), user and assistant"));
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
      if (at == std::string::npos) {  // a header or stray text: dropped, but for a marker's beginning
        held_.erase(0, held_.size() - partial_marker_tail(held_, {kChannel}));
        return out;
      }
      held_.erase(0, at + kChannel.size());
      state_ = State::header;
    }
    if (state_ == State::header) {  // "final", or "commentary to=functions.f <|constrain|>json"
      const size_t at = held_.find(kMessage);
      if (at == std::string::npos) {
        if (held_.size() > kLongestHeader) held_.clear(), state_ = State::outside;  // not a header after all
        return out;
      }
      channel_ = held_.substr(0, std::min(at, held_.find_first_of(" <")));
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
    state_ = State::outside;
  }
}

void HarmonyChannels::take(std::string_view text, Text& out) const {
  if (channel_ == "final") out.content += text;
  else if (channel_ == "analysis") out.reasoning += text;
}

HarmonyChannels::Text HarmonyChannels::finish() {
  Text out;
  if (state_ == State::message) take(held_, out);
  held_.clear();
  state_ = State::outside;
  return out;
}

}  // namespace larql
