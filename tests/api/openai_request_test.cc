// Request bodies: what OpenAI's API accepts is read, what larql does not do is refused by
// name with the parameter in `param`, never silently ignored.
#include <gtest/gtest.h>

#include <map>

#include "api/openai_request.h"

namespace larql {
namespace {

OpenAiError error_of(const std::string& body, bool chat) {
  auto r = parse_completion_request(body, chat);
  EXPECT_TRUE(std::holds_alternative<OpenAiError>(r)) << body;
  return std::holds_alternative<OpenAiError>(r) ? std::get<OpenAiError>(r) : OpenAiError{};
}

TEST(OpenAiRequest, ReadsTheFieldsOfBothEndpoints) {
  auto r = parse_completion_request(R"({"prompt":[1,2,3],"max_tokens":5,"temperature":0,"top_p":0.9,"seed":7,
                                        "stop":["a","b"],"stream":true,"stream_options":{"include_usage":true},"n":1})", false);
  ASSERT_TRUE(std::holds_alternative<CompletionRequest>(r));
  const auto& c = std::get<CompletionRequest>(r);
  EXPECT_EQ(std::get<std::vector<int>>(c.prompt), (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(c.max_tokens, 5u);
  EXPECT_EQ(c.temperature, 0.0f);
  EXPECT_FLOAT_EQ(c.top_p, 0.9f);
  EXPECT_EQ(c.seed, 7u);
  EXPECT_EQ(c.stop, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(c.stream && c.include_usage);

  auto chat = parse_completion_request(
      R"({"messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}],
          "max_completion_tokens":3})", true);
  ASSERT_TRUE(std::holds_alternative<CompletionRequest>(chat));
  EXPECT_EQ(std::get<CompletionRequest>(chat).messages.size(), 2u);
  EXPECT_EQ(std::get<CompletionRequest>(chat).messages[1].content, "ab");
  EXPECT_EQ(std::get<CompletionRequest>(chat).max_tokens, 3u);
}

TEST(OpenAiRequest, LogprobsAreCompletionsCountOrChatsSwitchAndCount) {
  auto top = [](const std::string& body, bool chat) {
    auto r = parse_completion_request(body, chat);
    EXPECT_TRUE(std::holds_alternative<CompletionRequest>(r)) << body;
    return std::holds_alternative<CompletionRequest>(r) ? std::get<CompletionRequest>(r).top_logprobs : std::nullopt;
  };
  EXPECT_EQ(top(R"({"prompt":"a"})", false), std::nullopt);
  EXPECT_EQ(top(R"({"prompt":"a","logprobs":null})", false), std::nullopt);
  EXPECT_EQ(top(R"({"prompt":"a","logprobs":0})", false), 0u) << "the chosen token's only";
  EXPECT_EQ(top(R"({"prompt":"a","logprobs":5})", false), 5u);
  const std::string messages = R"("messages":[{"role":"user","content":"a"}])";
  EXPECT_EQ(top("{" + messages + R"(,"logprobs":false})", true), std::nullopt);
  EXPECT_EQ(top("{" + messages + R"(,"logprobs":true})", true), 0u);
  EXPECT_EQ(top("{" + messages + R"(,"logprobs":true,"top_logprobs":20})", true), 20u);
}

TEST(OpenAiRequest, ReadsTheSamplingParameters) {
  auto r = parse_completion_request(R"({"prompt":"a","top_k":40,"min_p":0.05,"repetition_penalty":1.1,"presence_penalty":0.5,
                                        "frequency_penalty":-0.5,"logit_bias":{"7":-100,"12":2.5}})", false);
  ASSERT_TRUE(std::holds_alternative<CompletionRequest>(r));
  const auto& c = std::get<CompletionRequest>(r);
  EXPECT_EQ(c.top_k, 40u);
  EXPECT_FLOAT_EQ(c.min_p, 0.05f);
  EXPECT_FLOAT_EQ(c.repetition_penalty, 1.1f);
  EXPECT_FLOAT_EQ(c.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(c.frequency_penalty, -0.5f);
  EXPECT_EQ(c.logit_bias, (std::map<int, float>{{7, -100.0f}, {12, 2.5f}}));
  auto none = parse_completion_request(R"({"prompt":"a","top_k":-1})", false);
  ASSERT_TRUE(std::holds_alternative<CompletionRequest>(none));
  EXPECT_EQ(std::get<CompletionRequest>(none).top_k, 0u) << "-1: every token, as vLLM";
}

TEST(OpenAiRequest, ErrorsNameTheParameter) {
  EXPECT_EQ(error_of("{not json", false).param, "");
  EXPECT_EQ(error_of("[1]", false).message, "the body must be a JSON object");
  EXPECT_EQ(error_of("{}", false).param, "prompt");
  EXPECT_EQ(error_of(R"({"prompt":{"a":1}})", false).param, "prompt");
  EXPECT_EQ(error_of(R"({"prompt":["a","b"]})", false).param, "prompt") << "one prompt per request";
  EXPECT_EQ(error_of(R"({"messages":[]})", true).param, "messages");
  EXPECT_EQ(error_of(R"({"messages":[{"role":"user","content":5}]})", true).param, "messages[0].content");
  EXPECT_EQ(error_of(R"({"prompt":"a","max_tokens":0})", false).param, "max_tokens");
  EXPECT_EQ(error_of(R"({"prompt":"a","max_tokens":"5"})", false).param, "max_tokens");
  EXPECT_EQ(error_of(R"({"prompt":"a","temperature":3})", false).param, "temperature");
  EXPECT_EQ(error_of(R"({"prompt":"a","top_p":0})", false).param, "top_p");
  EXPECT_EQ(error_of(R"({"prompt":"a","n":17})", false).param, "n");
  EXPECT_EQ(error_of(R"({"prompt":"a","n":0})", false).param, "n");
  const auto three = parse_completion_request(R"({"prompt":"a","n":3})", false);
  ASSERT_TRUE(std::holds_alternative<CompletionRequest>(three));
  EXPECT_EQ(std::get<CompletionRequest>(three).n, 3u);
  EXPECT_EQ(error_of(R"({"prompt":"a","stop":["1","2","3","4","5"]})", false).param, "stop");
  EXPECT_EQ(error_of(R"({"prompt":"a","stream":"yes"})", false).param, "stream");
  EXPECT_EQ(error_of(R"({"prompt":"a","logprobs":21})", false).param, "logprobs");
  EXPECT_EQ(error_of(R"({"prompt":"a","logprobs":true})", false).param, "logprobs");
  EXPECT_EQ(error_of(R"({"prompt":"a","top_logprobs":2})", false).param, "top_logprobs");
  EXPECT_EQ(error_of(R"({"messages":[{"role":"user","content":"a"}],"logprobs":3})", true).param, "logprobs");
  EXPECT_EQ(error_of(R"({"messages":[{"role":"user","content":"a"}],"top_logprobs":3})", true).message,
            "top_logprobs needs logprobs: true");
  EXPECT_EQ(error_of(R"({"messages":[{"role":"user","content":"a"}],"logprobs":true,"top_logprobs":-1})", true).param,
            "top_logprobs");
  EXPECT_EQ(error_of(R"({"messages":[{"role":"user","content":"a"}],"echo":true})", true).param, "echo");
  EXPECT_EQ(error_of(R"({"prompt":"a","echo":"yes"})", false).param, "echo");
  EXPECT_EQ(error_of(R"({"prompt":"a","max_tokens":0,"echo":false})", false).param, "max_tokens");
  const auto scoring = parse_completion_request(R"({"prompt":"a","max_tokens":0,"echo":true,"logprobs":1})", false);
  ASSERT_TRUE(std::holds_alternative<CompletionRequest>(scoring)) << "what evaluation harnesses send";
  EXPECT_TRUE(std::get<CompletionRequest>(scoring).echo);
  EXPECT_EQ(std::get<CompletionRequest>(scoring).max_tokens, 0u);
  EXPECT_EQ(error_of(R"({"prompt":"a","response_format":{"type":"yaml"}})", false).param, "response_format");
  EXPECT_EQ(error_of(R"({"prompt":"a","response_format":{"type":"json_schema"}})", false).param, "response_format");
  const auto pattern = error_of(R"({"prompt":"a","response_format":{"type":"json_schema","json_schema":{"name":"x",
      "schema":{"type":"object","properties":{"id":{"type":"string","pattern":"^[a-z]+$"}}}}}})", false);
  EXPECT_EQ(pattern.param, "response_format");
  EXPECT_NE(pattern.message.find("json_schema/properties/id: the keyword 'pattern' is not supported"), std::string::npos)
      << pattern.message;
  EXPECT_TRUE(std::holds_alternative<CompletionRequest>(parse_completion_request(R"({"prompt":"a","response_format":{"type":"text"}})", false)));
  const auto with_tools = parse_completion_request(R"({"messages":[{"role":"user","content":"a"},
      {"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{\"x\": 1}"}}]},
      {"role":"tool","tool_call_id":"c","content":"2"}],
      "tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"tool_choice":"required"})", true);
  ASSERT_TRUE(std::holds_alternative<CompletionRequest>(with_tools)) << std::get<OpenAiError>(with_tools).message;
  const auto& t = std::get<CompletionRequest>(with_tools);
  EXPECT_EQ(t.tool_choice, CompletionRequest::ToolChoice::required);
  ASSERT_EQ(t.tools.size(), 1u);
  EXPECT_EQ(t.tools[0].dump(), R"({"type":"function","function":{"name":"f","parameters":{"type":"object"}}})") << "key order kept";
  ASSERT_EQ(t.messages[1].tool_calls.size(), 1u);
  EXPECT_EQ(t.messages[1].tool_calls[0].arguments, "{\"x\": 1}");
  EXPECT_EQ(t.messages[2].role, "tool");
  const auto object = parse_completion_request(R"({"prompt":"a","response_format":{"type":"json_object"}})", false);
  ASSERT_TRUE(std::holds_alternative<CompletionRequest>(object));
  EXPECT_NE(std::get<CompletionRequest>(object).grammar, nullptr);
  EXPECT_EQ(error_of(R"({"prompt":"a","top_k":-2})", false).param, "top_k");
  EXPECT_EQ(error_of(R"({"prompt":"a","top_k":1.5})", false).param, "top_k");
  EXPECT_EQ(error_of(R"({"prompt":"a","min_p":2})", false).param, "min_p");
  EXPECT_EQ(error_of(R"({"prompt":"a","repetition_penalty":0})", false).param, "repetition_penalty");
  EXPECT_EQ(error_of(R"({"prompt":"a","presence_penalty":3})", false).param, "presence_penalty");
  EXPECT_EQ(error_of(R"({"prompt":"a","frequency_penalty":"1"})", false).param, "frequency_penalty");
  EXPECT_EQ(error_of(R"({"prompt":"a","logit_bias":{"x":1}})", false).message, "logit_bias key 'x' is not a token id");
  EXPECT_EQ(error_of(R"({"prompt":"a","logit_bias":{"5":101}})", false).param, "logit_bias");
  EXPECT_EQ(error_of(R"({"prompt":"a","logit_bias":[1]})", false).param, "logit_bias");
  EXPECT_EQ(error_of(R"({"prompt":"a","logit_bias":{"-3":1}})", false).param, "logit_bias");
  EXPECT_EQ(error_of(R"({"messages":[{"role":"user","content":"a"}],"tools":[{"type":"function"}]})", true).param, "tools[0]");
  EXPECT_EQ(error_of(R"({"messages":[{"role":"user","content":"a"}],"tools":[{"type":"function","function":{"name":"a b"}}]})", true).param,
            "tools[0].function.name");
  EXPECT_EQ(error_of(R"({"messages":[{"role":"user","content":"a"}],"tools":[{"type":"function","function":{"name":"f"}}],
                        "tool_choice":{"type":"function","function":{"name":"g"}}})", true).message,
            "tool_choice names 'g', which is not among the tools");
  EXPECT_EQ(error_of(R"({"messages":[{"role":"user","content":"a"}],"tool_choice":"required"})", true).param, "tool_choice");
  EXPECT_EQ(error_of(R"({"prompt":"a","tools":[{"type":"function","function":{"name":"f"}}]})", false).param, "tools");
  // A key given twice: both parses keep the last one, so the tools checked are the tools rendered.
  const auto twice = parse_completion_request(R"({"messages":[{"role":"user","content":"a"}],
      "tools":[{"type":"function","function":{"name":"bad name"}}],"tools":[{"type":"function","function":{"name":"f"}}]})", true);
  ASSERT_TRUE(std::holds_alternative<CompletionRequest>(twice));
  EXPECT_EQ(std::get<CompletionRequest>(twice).tools.at(0)["function"]["name"], "f");
  EXPECT_EQ(error_of(R"({"messages":[{"role":"assistant","content":null,"tool_calls":[{"type":"function","function":{"name":"f","arguments":"[1]"}}]}]})", true).param,
            "messages[0].tool_calls[0].function.arguments");
  EXPECT_EQ(error_of(R"({"prompt":"a","seed":1.5})", false).param, "seed");
  // Found by fuzz_openai_request: each threw a JSON type error (a 500), or took another token.
  EXPECT_EQ(error_of(R"({"messages":[{"role":"user","content":[{"type":5,"text":"a"}]}]})", true).param,
            "messages[0].content");
  EXPECT_EQ(error_of(R"({"prompt":"a","stream_options":{"include_usage":"yes"}})", false).param,
            "stream_options.include_usage");
  EXPECT_EQ(error_of(R"({"prompt":"a","stream_options":[true]})", false).param, "stream_options");
  const OpenAiError wrapped = error_of(R"({"prompt":[1,4294967297]})", false);
  EXPECT_EQ(wrapped.param, "prompt");
  EXPECT_EQ(wrapped.message, "token id 4294967297 is outside any vocabulary");
  EXPECT_EQ(error_of(R"({"prompt":[-2147483649]})", false).param, "prompt");
}

}  // namespace
}  // namespace larql
