// OpenAI's harmony format (GPT-OSS): the prompt, rendered as the published chat template
// (llama.cpp's models/templates/openai-gpt-oss-120b.jinja states it), and the answer's
// channels: `final` is the assistant's content, `analysis` its reasoning (returned as
// reasoning_content, as llama-server does), `commentary` its tool calls.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "api/chat_template.h"
#include "base/errors.h"

namespace larql {

// The conversation as the template renders it with add_generation_prompt, reasoning
// "medium", no tools: the system header (model identity, knowledge cutoff, `date` as
// YYYY-MM-DD, the valid channels), a first system or developer message as the developer's
// instructions, user turns, earlier assistant turns in the final channel, then
// "<|start|>assistant". Roles other than system/developer (first), user and assistant are
// refused, naming them.
Result<std::string> render_harmony(const std::vector<ChatMessage>& messages, std::string_view date);

// Today's date in UTC, as the template's strftime_now("%Y-%m-%d").
std::string harmony_today();

// An answer's channels as it streams: each message is "<|channel|>NAME<|message|>TEXT"
// ended by <|end|>, <|return|> or <|call|> (a "<|start|>assistant" header between
// messages is skipped). The final channel's text is the content, the analysis channel's
// the reasoning; commentary (tool calls) and anything outside a message are dropped. A
// marker split across pushes is held until it is whole.
class HarmonyChannels {
 public:
  struct Text {
    std::string content, reasoning;
  };
  Text push(std::string_view text);
  Text finish();  // what is still held of a message the answer did not close

 private:
  enum class State { outside, header, message };
  void take(std::string_view text, Text& out) const;
  std::string held_;
  State state_ = State::outside;
  std::string channel_;  // of the message being read
};

}  // namespace larql
