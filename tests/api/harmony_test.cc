// GPT-OSS's harmony format: the prompt the published template (openai-gpt-oss-120b.jinja)
// renders for a conversation, the roles it refuses, and an answer's final channel (the
// content) and analysis channel (the reasoning) picked out of canned model output however
// the text is split into pieces (a random model never speaks harmony).
#include <gtest/gtest.h>

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
      {{{"user", "a"}, {"tool", "{}"}}, "after an assistant's tool call"},
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
  // A tool call (commentary) shows nothing; an unclosed final message, what came.
  EXPECT_EQ(shown("<|channel|>commentary to=functions.f <|constrain|>json<|message|>{}<|call|>", 9).content, "");
  EXPECT_EQ(shown("<|channel|>final<|message|>cut short <|e", 30).content, "cut short <|e");
  // Text that never opens a message shows nothing; a header longer than any real one is
  // dropped (held text stays bounded), and the next message is read.
  EXPECT_EQ(shown("plain words, no channels", 5).content, "");
  EXPECT_EQ(shown("<|channel|>" + std::string(300, 'x') + "<|channel|>final<|message|>ok<|end|>", 280).content, "ok");
}

}  // namespace
}  // namespace larql
