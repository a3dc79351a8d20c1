// The chat formats render what the real templates render (the expected strings are the
// documented output of each family's chat_template for the same conversation, BOS left
// to the tokenizer), and the formats are recognised from the real templates' markers.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "api/chat_template.h"
#include "api/gemma4_chat.h"

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
  for (const auto& bad : std::vector<std::vector<ChatMessage>>{{}, {{"user", "a"}, {"system", "late"}}}) {
    auto r = render_chat(ChatFormat::llama3, bad);
    EXPECT_FALSE(r.ok());
  }
  EXPECT_FALSE(render_chat(ChatFormat::gemma, {{"tool", "x"}}).ok()) << "a format without tool calls has no tool role";
  auto no_tools = render_chat(ChatFormat::gemma, {{"user", "a"}}, {nlohmann::ordered_json::parse(R"({"type":"function","function":{"name":"f"}})")});
  ASSERT_FALSE(no_tools.ok());
  EXPECT_NE(no_tools.error().message.find("tools are not supported with the gemma chat format"), std::string::npos);
  auto r = render_chat(ChatFormat::chatml, {{"user", "a"}, {"system", "late"}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("messages[1]"), std::string::npos) << r.error().message;
}

// A weather tool and one round trip: the user asks, the assistant calls, the tool answers.
const std::vector<nlohmann::ordered_json> kTools = {nlohmann::ordered_json::parse(
    R"({"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}})")};
const std::vector<ChatMessage> kRoundTrip = {
    {"system", "Be brief."},
    {"user", "Weather in Oslo?"},
    {"assistant", "", {{"get_weather", R"({"city": "Oslo"})"}}},
    {"tool", "{\"temp\": 3}"},
};

// Qwen 3's template (tokenizer_config.json chat_template) expanded by hand for these messages.
TEST(ChatTemplate, ChatmlToolsAsQwen3sTemplateRendersThem) {
  auto r = render_chat(ChatFormat::chatml, kRoundTrip, kTools);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(*r,
            "<|im_start|>system\nBe brief.\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
            "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
            "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Weather in a city\", "
            "\"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}, \"required\": [\"city\"]}}}\n"
            "</tools>\n\nFor each function call, return a json object with function name and arguments within "
            "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n"
            "</tool_call><|im_end|>\n"
            "<|im_start|>user\nWeather in Oslo?<|im_end|>\n"
            "<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call><|im_end|>\n"
            "<|im_start|>user\n<tool_response>\n{\"temp\": 3}\n</tool_response><|im_end|>\n"
            "<|im_start|>assistant\n");
  // Two results in a row share one user turn; text before a call is kept, a newline between.
  auto two = render_chat(ChatFormat::chatml, {{"user", "q"}, {"assistant", "Let me see.", {{"f", "{}"}, {"g", "{}"}}},
                                              {"tool", "1"}, {"tool", "2"}});
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(*two, "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\nLet me see.\n<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n"
                  "</tool_call>\n<tool_call>\n{\"name\": \"g\", \"arguments\": {}}\n</tool_call><|im_end|>\n<|im_start|>user\n"
                  "<tool_response>\n1\n</tool_response>\n<tool_response>\n2\n</tool_response><|im_end|>\n<|im_start|>assistant\n");
}

// Gemma 4's template (google-gemma-4-31B-it.jinja) expanded by hand: declarations in the
// system turn, the call and its result in the model's turn, which goes on after them.
TEST(ChatTemplate, Gemma4ToolsAsItsTemplateRendersThem) {
  auto r = render_chat(ChatFormat::gemma4, kRoundTrip, kTools);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(*r,
            "<|turn>system\nBe brief.<|tool>declaration:get_weather{description:<|\"|>Weather in a city<|\"|>,parameters:{"
            "properties:{city:{type:<|\"|>STRING<|\"|>}},required:[<|\"|>city<|\"|>],type:<|\"|>OBJECT<|\"|>}}<tool|><turn|>\n"
            "<|turn>user\nWeather in Oslo?<turn|>\n"
            "<|turn>model\n<|tool_call>call:get_weather{city:<|\"|>Oslo<|\"|>}<tool_call|>"
            "<|tool_response>response:get_weather{value:<|\"|>{\"temp\": 3}<|\"|>}<tool_response|>");
  // The answer after the result continues the model's turn; then a new generation prompt.
  auto more = render_chat(ChatFormat::gemma4, {{"user", "q"}, {"assistant", "", {{"f", R"({"b": 1, "a": "x"})", "c1"}}},
                                              {"tool", "r1", {}, "c1"}, {"assistant", "It is 3."}, {"user", "And?"}});
  ASSERT_TRUE(more.ok()) << more.error().message;
  EXPECT_EQ(*more, "<|turn>user\nq<turn|>\n<|turn>model\n<|tool_call>call:f{a:<|\"|>x<|\"|>,b:1}<tool_call|>"
                   "<|tool_response>response:f{value:<|\"|>r1<|\"|>}<tool_response|>It is 3.<turn|>\n<|turn>user\nAnd?<turn|>\n"
                   "<|turn>model\n<|channel>thought\n<channel|>");
  // A call without its result yet: the turn ends waiting for it.
  auto waiting = render_chat(ChatFormat::gemma4, {{"user", "q"}, {"assistant", "", {{"f", "{}"}}}});
  ASSERT_TRUE(waiting.ok());
  EXPECT_EQ(*waiting, "<|turn>user\nq<turn|>\n<|turn>model\n<|tool_call>call:f{}<tool_call|><|tool_response>");
}

TEST(ChatTemplate, Gemma4DeclarationsFollowItsFormatParameters) {
  const auto tool = nlohmann::ordered_json::parse(R"({"type": "function", "function": {"name": "f", "description": "d",
      "parameters": {"type": "object", "properties": {
        "units": {"type": "string", "enum": ["c", "f"], "description": "Unit"},
        "days": {"type": "array", "items": {"type": "integer"}},
        "where": {"type": "object", "properties": {"lat": {"type": "number"}}, "required": ["lat"]},
        "note": {"type": "string", "nullable": true}},
      "required": ["where"]}}})");
  auto d = gemma4_declaration(tool);
  ASSERT_TRUE(d.ok()) << d.error().message;
  EXPECT_EQ(*d, "declaration:f{description:<|\"|>d<|\"|>,parameters:{properties:{"
                "days:{items:{type:<|\"|>INTEGER<|\"|>},type:<|\"|>ARRAY<|\"|>},"
                "note:{nullable:true,type:<|\"|>STRING<|\"|>},"
                "units:{description:<|\"|>Unit<|\"|>,enum:[<|\"|>c<|\"|>,<|\"|>f<|\"|>],type:<|\"|>STRING<|\"|>},"
                "where:{properties:{lat:{type:<|\"|>NUMBER<|\"|>}},required:[<|\"|>lat<|\"|>],type:<|\"|>OBJECT<|\"|>}},"
                "required:[<|\"|>where<|\"|>],type:<|\"|>OBJECT<|\"|>}}");
  const auto odd = nlohmann::ordered_json::parse(R"({"type": "function", "function": {"name": "g", "parameters": {"type": "object",
      "properties": {"x": {"type": 3}}}}})");
  auto refused = gemma4_declaration(odd);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("tool 'g': Gemma 4's template cannot write its parameters: property 'x' has a type"),
            std::string::npos) << refused.error().message;
}

// Llama 3.1's template with its defaults, expanded by hand.
TEST(ChatTemplate, Llama3ToolsAsLlama31sTemplateRendersThem) {
  auto r = render_chat(ChatFormat::llama3, kRoundTrip, kTools);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(*r,
            "<|start_header_id|>system<|end_header_id|>\n\nEnvironment: ipython\nCutting Knowledge Date: December 2023\n"
            "Today Date: 26 Jul 2024\n\nBe brief.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nGiven the following functions, please respond with a JSON for a function "
            "call with its proper arguments that best answers the given prompt.\n\nRespond in the format {\"name\": function name, "
            "\"parameters\": dictionary of argument name and its value}.Do not use variables.\n\n"
            "{\n    \"type\": \"function\",\n    \"function\": {\n        \"name\": \"get_weather\",\n"
            "        \"description\": \"Weather in a city\",\n        \"parameters\": {\n            \"type\": \"object\",\n"
            "            \"properties\": {\n                \"city\": {\n                    \"type\": \"string\"\n                }\n"
            "            },\n            \"required\": [\n                \"city\"\n            ]\n        }\n    }\n}\n\n"
            "Weather in Oslo?<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}<|eot_id|>"
            "<|start_header_id|>ipython<|end_header_id|>\n\n\"{\\\"temp\\\": 3}\"<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  auto two = render_chat(ChatFormat::llama3, {{"user", "q"}, {"assistant", "", {{"f", "{}"}, {"g", "{}"}}}}, kTools);
  ASSERT_FALSE(two.ok());
  EXPECT_NE(two.error().message.find("one tool call per assistant message"), std::string::npos);
}

}  // namespace
}  // namespace larql
