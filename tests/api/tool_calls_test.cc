#include "api/tool_calls.h"

#include <gtest/gtest.h>

namespace larql {
namespace {

struct Parsed {
  std::string content;
  std::vector<std::pair<std::string, std::string>> calls;  // name, arguments
};

Parsed parse_in_pieces(ChatFormat format, const std::vector<std::string>& pieces) {
  ToolCallParser parser(chat_format_info(format).tool_call);
  Parsed out;
  auto add = [&](ToolCallParser::Out o) {
    out.content += o.content;
    for (auto& c : o.calls) out.calls.emplace_back(c.name, c.arguments);
  };
  for (const auto& p : pieces) add(parser.push(p));
  add(parser.finish());
  return out;
}

// Whole, cut in two at every byte, and byte by byte: always the same content and calls.
void expect_split(ChatFormat format, const std::string& answer, const std::string& content,
                  const std::vector<std::pair<std::string, std::string>>& calls) {
  std::vector<std::vector<std::string>> ways = {{answer}};
  for (size_t cut = 1; cut < answer.size(); ++cut) ways.push_back({answer.substr(0, cut), answer.substr(cut)});
  std::vector<std::string> bytes;
  for (char c : answer) bytes.emplace_back(1, c);
  ways.push_back(bytes);
  for (const auto& pieces : ways) {
    const Parsed p = parse_in_pieces(format, pieces);
    EXPECT_EQ(p.content, content) << answer << " in " << pieces.size() << " pieces";
    EXPECT_EQ(p.calls, calls) << answer << " in " << pieces.size() << " pieces";
  }
}

TEST(ToolCallParser, HermesBlocksAfterText) {
  expect_split(ChatFormat::chatml,
               "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\", \"days\": 2}}\n</tool_call>",
               "Let me check.", {{"get_weather", R"({"city":"Oslo","days":2})"}});
  expect_split(ChatFormat::chatml,
               "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"g\", \"parameters\": {\"a\": [1]}}\n</tool_call>",
               "", {{"f", "{}"}, {"g", R"({"a":[1]})"}});
  expect_split(ChatFormat::chatml, "Plain text, a < b and <tool but no call.\n", "Plain text, a < b and <tool but no call.\n", {});
  expect_split(ChatFormat::chatml, "<tool_call>not json</tool_call> after", "<tool_call>not json</tool_call> after", {});
  expect_split(ChatFormat::chatml, "cut off <tool_call>\n{\"name\": \"f\"", "cut off<tool_call>\n{\"name\": \"f\"", {});
}

TEST(ToolCallParser, Gemma4CallsInItsOwnSyntaxAfterText) {
  expect_split(ChatFormat::gemma4, "Let me check.<|tool_call>call:get_weather{city:<|\"|>Oslo, \"NO\"<|\"|>,days:3}<tool_call|>",
               "Let me check.", {{"get_weather", R"({"city":"Oslo, \"NO\"","days":3})"}});
  expect_split(ChatFormat::gemma4, "<|tool_call>call:a{}<tool_call|><|tool_call>call:b{x:[1,None]}<tool_call|>", "",
               {{"a", "{}"}, {"b", R"({"x":[1,null]})"}});
  // Not a call: stays text, marks included.
  expect_split(ChatFormat::gemma4, "<|tool_call>call:a{x:<tool_call|> done", "<|tool_call>call:a{x:<tool_call|> done", {});
  EXPECT_FALSE(parse_gemma4_call("a{}")) << "call: first";
  EXPECT_FALSE(parse_gemma4_call("call:{}")) << "a name";
  EXPECT_FALSE(parse_gemma4_call("call:a[1]")) << "arguments are an object";
}

TEST(ToolCallParser, Llama3TheWholeAnswerIsTheCall) {
  expect_split(ChatFormat::llama3, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}", "",
               {{"get_weather", R"({"city":"Oslo"})"}});
  expect_split(ChatFormat::llama3, "It is cold {brr}.", "It is cold {brr}.", {});
  expect_split(ChatFormat::llama3, "{not a call}", "{not a call}", {});
}

}  // namespace
}  // namespace larql
