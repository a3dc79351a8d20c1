// OpenAI's harmony format (GPT-OSS): the prompt, rendered as the published chat template
// (llama.cpp's models/templates/openai-gpt-oss-120b.jinja states it), and the answer's
// channels, of which only `final` is the assistant's content (analysis is its reasoning,
// commentary its tool calls).
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

// Passes on the text of the answer's final channel only, as it streams: text before
// "<|channel|>final<|message|>" is held back and dropped, and the final message ends at
// <|end|>, <|return|> or <|call|>. A marker split across pushes is held until it is whole.
class HarmonyFinalChannel {
 public:
  std::string push(std::string_view text);
  std::string finish();  // what is still held of a final message the answer did not close

 private:
  std::string held_;
  bool in_final_ = false;
};

}  // namespace larql
