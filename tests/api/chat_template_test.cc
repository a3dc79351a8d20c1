// The chat formats render what the real templates render (the expected strings are the
// documented output of each family's chat_template for the same conversation, BOS left
// to the tokenizer), and the formats are recognised from the real templates' markers.
#include <gtest/gtest.h>

#include "api/chat_template.h"

namespace larql {
namespace {

const std::vector<ChatMessage> kConversation{
    {"system", "You are brief."}, {"user", "Hi there "}, {"assistant", "Hello."}, {"user", "What is 2+2?"}};

std::string render(ChatFormat f, const std::vector<ChatMessage>& m = kConversation) {
  auto r = render_chat(f, m);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? *r : "";
}

TEST(ChatTemplate, Llama3) {
  EXPECT_EQ(render(ChatFormat::llama3),
            "<|start_header_id|>system<|end_header_id|>\n\nYou are brief.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nHello.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nWhat is 2+2?<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatTemplate, ChatmlAsQwenWritesIt) {
  EXPECT_EQ(render(ChatFormat::chatml),
            "<|im_start|>system\nYou are brief.<|im_end|>\n<|im_start|>user\nHi there <|im_end|>\n"
            "<|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplate, Llama2FoldsTheSystemPromptIntoTheFirstInstruction) {
  EXPECT_EQ(render(ChatFormat::llama2),
            "[INST] <<SYS>>\nYou are brief.\n<</SYS>>\n\nHi there [/INST] Hello.</s>[INST] What is 2+2? [/INST]");
}

TEST(ChatTemplate, GemmaCallsTheAssistantModelAndFoldsTheSystemText) {
  EXPECT_EQ(render(ChatFormat::gemma),
            "<start_of_turn>user\nYou are brief.\n\nHi there<end_of_turn>\n<start_of_turn>model\nHello.<end_of_turn>\n"
            "<start_of_turn>user\nWhat is 2+2?<end_of_turn>\n<start_of_turn>model\n");
}

TEST(ChatTemplate, Gemma4HasASystemTurnAndAnEmptyThoughtChannel) {
  EXPECT_EQ(render(ChatFormat::gemma4),
            "<|turn>system\nYou are brief.<turn|>\n<|turn>user\nHi there<turn|>\n<|turn>model\nHello.<turn|>\n"
            "<|turn>user\nWhat is 2+2?<turn|>\n<|turn>model\n<|channel>thought\n<channel|>");
}

TEST(ChatTemplate, RecognisedByTheMarkersOfTheRealTemplates) {
  // Fragments of the real chat_template strings.
  EXPECT_EQ(detect_chat_format("{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' }}"), ChatFormat::llama3);
  EXPECT_EQ(detect_chat_format("{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"),
            ChatFormat::chatml);
  EXPECT_EQ(detect_chat_format("{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}"), ChatFormat::llama2);
  EXPECT_EQ(detect_chat_format("{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}"),
            ChatFormat::gemma);
  EXPECT_EQ(detect_chat_format("{{- '<|turn>' + role + '\\n' -}}{{- '<turn|>\\n' -}}"), ChatFormat::gemma4)
      << "Gemma 4's marker wins over Gemma's, whose it is not";
  EXPECT_EQ(detect_chat_format("{% for m in messages %}{{ m.content }}{% endfor %}"), std::nullopt);
  EXPECT_EQ(find_chat_format("gemma4"), ChatFormat::gemma4);
  EXPECT_EQ(find_chat_format("jinja"), std::nullopt);
}

TEST(ChatTemplate, RefusesWhatNoFormatExpresses) {
  for (const auto& bad : std::vector<std::vector<ChatMessage>>{{}, {{"tool", "x"}}, {{"user", "a"}, {"system", "late"}}}) {
    auto r = render_chat(ChatFormat::llama3, bad);
    EXPECT_FALSE(r.ok());
  }
  auto r = render_chat(ChatFormat::chatml, {{"user", "a"}, {"system", "late"}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("messages[1]"), std::string::npos) << r.error().message;
}

}  // namespace
}  // namespace larql
