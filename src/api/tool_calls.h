// An assistant's answer split into its text and its tool calls, as the chat format writes
// them (ToolCallWords): Hermes-style <tool_call>{"name", "arguments"}</tool_call> blocks
// after any text, Gemma 4's <|tool_call>call:NAME{key:value}<tool_call|> ones, or Llama
// 3.1's whole answer as {"name", "parameters"}. Streamed: text is
// passed on as it comes except what may still turn out to be a call (a partial opening tag,
// trailing whitespace, or a whole answer that starts with "{"), and each call once it is
// complete. A block that is not a call's JSON stays text.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/chat_template.h"

namespace larql {

struct ToolCall {
  std::string name;
  std::string arguments;  // the arguments object as compact JSON text
};

class ToolCallParser {
 public:
  explicit ToolCallParser(ToolCallWords words) : words_(words) {}
  struct Out {
    std::string content;
    std::vector<ToolCall> calls;
  };
  Out push(std::string_view text);
  Out finish();  // the end of the answer: what was held back
  bool called() const { return called_; }

 private:
  Out take(bool at_end);
  std::optional<ToolCall> parse(std::string_view block) const;
  ToolCallWords words_;
  std::string held_;     // text not passed on yet
  bool in_call_ = false; // inside an opening tag's block
  bool called_ = false;
};

// A call's JSON ({"name": string, "arguments" or "parameters": object}), or nothing.
std::optional<ToolCall> parse_tool_call(std::string_view json_text);
// Gemma 4's "call:NAME{key:value,...}" (its arguments returned as JSON), or nothing.
std::optional<ToolCall> parse_gemma4_call(std::string_view text);

}  // namespace larql
