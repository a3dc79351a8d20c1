// Chat templates for the families larql loads, rendered in C++ (no Jinja engine is
// packaged for C++): the model's own template (tokenizer_config.json `chat_template`, or
// GGUF `tokenizer.chat_template`) is recognised by its distinctive markers, as llama.cpp
// does, and rendered by hand to the string the real template produces. BOS is left out:
// the tokenizer adds it, once.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/errors.h"
#include "constrain/json_schema.h"

namespace larql {

enum class ChatFormat { llama3, llama2, chatml, gemma, gemma4, harmony };

// How a format's assistant writes a tool call: `before` + the function's name + `between`
// + its arguments as an object in `syntax` + `after` (all empty: larql has no tool calls for
// it). A call is read back from the text between `open` and `close`, or, when they are
// empty, from the whole answer. `wait`: what the model writes after its calls to wait for
// their results (generation ends there).
struct ToolCallWords {
  std::string_view before, between, after;
  std::string_view open = {}, close = {};
  ValueSyntax syntax = ValueSyntax::json;
  std::string_view wait = {};
  bool supported() const { return !before.empty(); }
  // The marks around and inside calls that a vocabulary may hold as special tokens (no
  // text of their own): a grammar of calls spells them by their vocabulary strings.
  std::vector<std::string_view> marks() const;
};

struct ChatFormatInfo {
  ChatFormat format;
  std::string_view name;    // for --chat-template and logs
  std::string_view marker;  // text only this family's template contains
  std::string_view end_of_turn;  // the token that ends an assistant turn (generation stops there)
  ToolCallWords tool_call = {};
};

// Checked in this order: Gemma 4's "<|turn>" before Gemma's "<start_of_turn>".
inline constexpr ChatFormatInfo kChatFormats[] = {
    // GPT-OSS (api/harmony.h): a call is a commentary message to the function, read from the
    // answer's channels; generation stops at its <|call|>.
    {ChatFormat::harmony, "harmony", "<|channel|>", "<|return|>",
     {"<|channel|>commentary to=functions.", " <|constrain|>json<|message|>", "<|call|>", {}, {}, ValueSyntax::json, "<|call|>"}},
    // Gemma 4's own syntax (constrain/gemma4_syntax.h), after any text; <|tool_response> waits.
    {ChatFormat::gemma4, "gemma4", "<|turn>", "<turn|>",
     {"<|tool_call>call:", "", "<tool_call|>", "<|tool_call>", "<tool_call|>", ValueSyntax::gemma4, "<|tool_response>"}},
    {ChatFormat::gemma, "gemma", "<start_of_turn>", "<end_of_turn>"},
    // Llama 3.1's JSON tool calls ("parameters"), the whole answer.
    {ChatFormat::llama3, "llama3", "<|start_header_id|>", "<|eot_id|>", {"{\"name\": \"", "\", \"parameters\": ", "}"}},
    // Hermes-style, as Qwen 2.5 and 3 write them, after any text.
    {ChatFormat::chatml, "chatml", "<|im_start|>", "<|im_end|>",
     {"<tool_call>\n{\"name\": \"", "\", \"arguments\": ", "}\n</tool_call>", "<tool_call>", "</tool_call>"}},
    {ChatFormat::llama2, "llama2", "[INST]", "</s>"},
};

const ChatFormatInfo& chat_format_info(ChatFormat f);
std::optional<ChatFormat> find_chat_format(std::string_view name);
// The format whose marker the template text contains, if any.
std::optional<ChatFormat> detect_chat_format(std::string_view template_text);

struct ChatToolCall {
  std::string name;
  std::string arguments;  // a JSON object's text, as OpenAI sends it
  std::string id = {};    // as the client gave it (a tool message names it)
};

struct ChatMessage {
  std::string role;  // system, user, assistant or tool (harmony: also developer)
  std::string content;
  std::vector<ChatToolCall> tool_calls = {};  // an assistant's
  std::string tool_call_id = {};              // a tool message's: the call it answers
};

// The prompt text for `messages` followed by the assistant's opening (the generation
// prompt), without BOS. Errors name what a format cannot express (e.g. Gemma 2's
// template refuses a system message; we fold it into the first user turn, as Gemma 3's does).
// `tools`: OpenAI's tool definitions ({"type": "function", "function": {...}}), rendered as
// the format's template does (formats whose tool_call words are empty refuse them).
Result<std::string> render_chat(ChatFormat format, const std::vector<ChatMessage>& messages,
                                const std::vector<nlohmann::ordered_json>& tools = {});

}  // namespace larql
