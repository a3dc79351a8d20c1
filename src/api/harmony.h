// OpenAI's harmony format (GPT-OSS): the prompt, rendered as the published chat template
// (llama.cpp's models/templates/openai-gpt-oss-120b.jinja states it), and the answer's
// channels: `final` is the assistant's content, `analysis` its reasoning (returned as
// reasoning_content, as llama-server does), `commentary` its tool calls.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "api/chat_template.h"
#include "api/tool_calls.h"
#include "base/errors.h"

namespace larql {

// The conversation as the template renders it with add_generation_prompt, reasoning
// "medium": the system header (model identity, knowledge cutoff, `date` as YYYY-MM-DD, the
// valid channels, and with tools where their calls go), a first system or developer message
// as the developer's instructions and the tools as a TypeScript namespace `functions`, user
// turns, earlier assistant turns in the final channel, an assistant's call (one per
// message; its text as analysis unless a final answer follows) as
// "<|start|>assistant to=functions.NAME<|channel|>commentary json<|message|>ARGS<|call|>",
// a tool's result as "<|start|>functions.NAME to=assistant<|channel|>commentary<|message|>",
// then "<|start|>assistant". Other roles are refused, naming them. Call arguments are
// written as the objects they encode (as llama.cpp passes them to templates), not as strings.
Result<std::string> render_harmony(const std::vector<ChatMessage>& messages, std::string_view date,
                                   const std::vector<nlohmann::ordered_json>& tools = {});

// Today's date in UTC, as the template's strftime_now("%Y-%m-%d").
std::string harmony_today();

// An answer's channels as it streams: each message is "<|channel|>NAME<|message|>TEXT"
// ended by <|end|>, <|return|> or <|call|> (a "<|start|>assistant" header between
// messages is skipped). The final channel's text is the content, the analysis channel's
// the reasoning, and a message to a function ("to=functions.NAME" in its role or channel
// header) a tool call, its text the arguments (ended by <|call|>, or by the answer's end:
// generation stops at <|call|>). Other commentary and anything outside a message are
// dropped. A marker split across pushes is held until it is whole.
class HarmonyChannels {
 public:
  struct Text {
    std::string content, reasoning;
    std::vector<ToolCall> calls;
  };
  Text push(std::string_view text);
  Text finish();  // what is still held of a message the answer did not close

 private:
  enum class State { outside, header, message };
  void take(std::string_view text, Text& out);
  void end_message(Text& out);
  std::string held_;
  State state_ = State::outside;
  std::string role_header_;  // the text before the message's <|channel|> ("<|start|>assistant to=functions.f")
  std::string channel_;      // of the message being read
  std::string function_;     // the function it calls, if any
  std::string arguments_;    // a call's text so far
};

}  // namespace larql
