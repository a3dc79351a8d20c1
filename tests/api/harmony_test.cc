// GPT-OSS's harmony format: the prompt the published template (openai-gpt-oss-120b.jinja)
// renders for a conversation, the roles it refuses, and an answer's final channel (the
// content) and analysis channel (the reasoning) picked out of canned model output however
// the text is split into pieces (a random model never speaks harmony).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "api/chat_template.h"
#include "api/harmony.h"

namespace larql {
namespace {

TEST(Harmony, RendersThePublishedTemplatesPrompt) {
  const std::vector<ChatMessage> conversation{
      {"system", "You are brief."}, {"user", "Hi there "}, {"assistant", "Hello."}, {"user", "What is 2+2?"}};
  auto r = render_harmony(conversation, "2026-12-04");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(*r,
            "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n"
            "Knowledge cutoff: 2024-06\nCurrent date: 2026-12-04\n\nReasoning: medium\n\n"
            "# Valid channels: analysis, commentary, final. Channel must be included for every message.<|end|>"
            "<|start|>developer<|message|># Instructions\n\nYou are brief.\n\n<|end|>"
            "<|start|>user<|message|>Hi there <|end|>"
            "<|start|>assistant<|channel|>final<|message|>Hello.<|end|>"
            "<|start|>user<|message|>What is 2+2?<|end|>"
            "<|start|>assistant");
  // Without a system or developer message there is no developer block.
  auto plain = render_harmony({{"user", "Hi"}}, "2026-12-04");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->find("<|start|>developer"), std::string::npos);
  EXPECT_TRUE(plain->ends_with("<|start|>user<|message|>Hi<|end|><|start|>assistant"));
  // The template's marker picks the format.
  EXPECT_EQ(detect_chat_format("{{- \"<|start|>assistant<|channel|>final<|message|>\" + message.content + \"<|end|>\" }}"),
            ChatFormat::harmony);
  EXPECT_EQ(find_chat_format("harmony"), ChatFormat::harmony);
}

TEST(Harmony, UnknownRolesAndChannelTagsAreRefusedByName) {
  const std::vector<std::pair<std::vector<ChatMessage>, std::string>> bad{
      {{{"user", "a"}, {"narrator", "b"}}, "messages[1].role is 'narrator'"},
      {{{"user", "a"}, {"tool", "{}"}}, "messages[1].role is 'tool', but no assistant tool call comes before it"},
      {{{"user", "a"}, {"assistant", "", {{"f", "{}"}, {"g", "{}"}}}}, "messages[1].tool_calls: the harmony format takes one tool call"},
      {{{"user", "a"}, {"developer", "late"}}, "only first"},
      {{{"user", "a"}, {"assistant", "<|channel|>final<|message|>x"}}, "messages[1].content holds <|channel|> tags"},
  };
  for (const auto& [messages, expected] : bad) {
    auto r = render_chat(ChatFormat::harmony, messages);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find(expected), std::string::npos) << r.error().message;
  }
}

// Every way of cutting the text into two pieces, and one character at a time, shows the same.
HarmonyChannels::Text shown(const std::string& text, size_t cut) {
  HarmonyChannels channels;
  HarmonyChannels::Text out = channels.push(text.substr(0, cut));
  for (const auto& t : {channels.push(text.substr(cut)), channels.finish()}) {
    out.content += t.content;
    out.reasoning += t.reasoning;
    out.calls.insert(out.calls.end(), t.calls.begin(), t.calls.end());
  }
  return out;
}

TEST(Harmony, TheFinalChannelIsTheContentAndAnalysisTheReasoningHoweverTheTextArrives) {
  const std::string answer =
      "<|channel|>analysis<|message|>The user greets; answer <|e briefly.<|end|>"
      "<|start|>assistant<|channel|>final<|message|>Hello <|world|>!<|return|>";
  for (size_t cut = 0; cut <= answer.size(); ++cut) {
    const auto t = shown(answer, cut);
    ASSERT_EQ(t.content, "Hello <|world|>!") << cut;
    ASSERT_EQ(t.reasoning, "The user greets; answer <|e briefly.") << cut;
  }
  HarmonyChannels one_by_one;
  std::string content, reasoning;
  for (char c : answer) {
    const auto t = one_by_one.push(std::string(1, c));
    content += t.content, reasoning += t.reasoning;
  }
  EXPECT_EQ(content + one_by_one.finish().content, "Hello <|world|>!");
  EXPECT_EQ(reasoning, "The user greets; answer <|e briefly.");
  // A tool call (commentary) shows no text; an unclosed final message, what came.
  EXPECT_EQ(shown("<|channel|>commentary to=functions.f <|constrain|>json<|message|>{}<|call|>", 9).content, "");
  EXPECT_EQ(shown("<|channel|>commentary<|message|>a preamble<|end|>", 9).content, "") << "commentary to no one";
  EXPECT_EQ(shown("<|channel|>final<|message|>cut short <|e", 30).content, "cut short <|e");
  // Text that never opens a message shows nothing; a header longer than any real one is
  // dropped (held text stays bounded), and the next message is read.
  EXPECT_EQ(shown("plain words, no channels", 5).content, "");
  EXPECT_EQ(shown("<|channel|>" + std::string(300, 'x') + "<|channel|>final<|message|>ok<|end|>", 280).content, "ok");
}

// A call is a message to a function, named in the channel's header or the role's, its text
// the arguments; generation stops at <|call|>, so the answer may end without it.
TEST(Harmony, MessagesToFunctionsAreToolCallsHoweverTheTextArrives) {
  const std::string answer =
      "<|channel|>analysis<|message|>Need weather.<|end|>"
      "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Oslo\"}<|call|>"
      "<|start|>assistant to=functions.get_time<|channel|>commentary json<|message|>{\"zone\":\"CET\"}";
  for (size_t cut = 0; cut <= answer.size(); ++cut) {
    const auto t = shown(answer, cut);
    ASSERT_EQ(t.reasoning, "Need weather.") << cut;
    ASSERT_EQ(t.content, "") << cut;
    ASSERT_EQ(t.calls.size(), 2u) << cut;
    EXPECT_EQ(t.calls[0].name, "get_weather");
    EXPECT_EQ(t.calls[0].arguments, R"({"city":"Oslo"})");
    EXPECT_EQ(t.calls[1].name, "get_time");
    EXPECT_EQ(t.calls[1].arguments, R"({"zone":"CET"})");
  }
}

// The template's tools: the TypeScript namespace in the developer message, the call and the
// result as messages (openai-gpt-oss-120b.jinja expanded by hand, with transformers'
// trim_blocks and lstrip_blocks).
TEST(Harmony, RendersToolsCallsAndResultsAsThePublishedTemplate) {
  const std::vector<nlohmann::ordered_json> tools = {nlohmann::ordered_json::parse(R"({"type": "function", "function": {
      "name": "get_weather", "description": "Weather in a city",
      "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "The city"},
        "unit": {"type": "string", "enum": ["c", "f"], "default": "c"},
        "days": {"type": "array", "items": {"type": "integer"}},
        "where": {"type": "object", "properties": {"lat": {"type": "number"}}, "required": ["lat"]}},
      "required": ["city"]}}})"),
                                                     nlohmann::ordered_json::parse(R"({"type": "function", "function": {
      "name": "now", "description": "The time"}})")};
  const std::vector<ChatMessage> conversation{{"user", "Weather in Oslo?"},
                                              {"assistant", "", {{"get_weather", R"({"city": "Oslo"})", "c1"}}},
                                              {"tool", "3 \"C\"", {}, "c1"}};
  auto r = render_harmony(conversation, "2026-12-04", tools);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(*r,
            "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n"
            "Knowledge cutoff: 2024-06\nCurrent date: 2026-12-04\n\nReasoning: medium\n\n"
            "# Valid channels: analysis, commentary, final. Channel must be included for every message.\n"
            "Calls to these tools must go to the commentary channel: 'functions'.<|end|>"
            "<|start|>developer<|message|># Tools\n\n## functions\n\nnamespace functions {\n\n"
            "// Weather in a city\ntype get_weather = (_: {\n"
            "// The city\ncity: string,\n"
            "unit?: \"c\" | \"f\", // default: c,\n"
            "days?: number[],\n"
            "where?: {\nlat: \n                number},\n"
            "}) => any;\n\n"
            "// The time\ntype now = () => any;\n\n"
            "} // namespace functions<|end|>"
            "<|start|>user<|message|>Weather in Oslo?<|end|>"
            "<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{\"city\": \"Oslo\"}<|call|>"
            "<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>\"3 \\\"C\\\"\"<|end|>"
            "<|start|>assistant");
  // Text beside a call is its analysis, dropped once a final answer follows.
  auto kept = render_harmony({{"user", "q"}, {"assistant", "Checking.", {{"now", "{}"}}}, {"tool", "9"}}, "2026-12-04", tools);
  ASSERT_TRUE(kept.ok());
  EXPECT_NE(kept->find("<|start|>assistant<|channel|>analysis<|message|>Checking.<|end|><|start|>assistant to=functions.now"),
            std::string::npos);
  auto dropped = render_harmony({{"user", "q"}, {"assistant", "Checking.", {{"now", "{}"}}}, {"tool", "9"}, {"assistant", "Nine."}},
                                "2026-12-04", tools);
  ASSERT_TRUE(dropped.ok());
  EXPECT_EQ(dropped->find("Checking."), std::string::npos);
  EXPECT_TRUE(dropped->ends_with("<|start|>assistant<|channel|>final<|message|>Nine.<|end|><|start|>assistant"));
}

}  // namespace
}  // namespace larql
