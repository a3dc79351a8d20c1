#include "constrain/json_matcher.h"

#include "constrain/matcher_walks.h"

#include <random>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace larql {
namespace {

using ojson = nlohmann::ordered_json;

// The structured-output test's schema: a free string, an integer, an enum array, a nested object.
constexpr const char* kPerson = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "maxLength": 12},
    "age": {"type": "integer"},
    "colours": {"type": "array", "items": {"enum": ["red", "green", "blue"]}, "minItems": 1, "maxItems": 3},
    "home": {"type": "object", "properties": {"city": {"type": "string"}, "zip": {"type": ["integer", "null"]}},
             "required": ["city"]},
    "score": {"type": "number"}
  },
  "required": ["name", "age", "colours", "home"]
})";

std::shared_ptr<const JsonGrammar> grammar(const char* schema) {
  auto g = JsonGrammar::from_schema(ojson::parse(schema));
  EXPECT_TRUE(g) << g.error().message;
  return g ? *g : nullptr;
}

// Whether the whole text is taken and closes the value.
bool closes(const JsonGrammar& g, std::string_view text) {
  JsonMatcher m(g);
  return m.feed(text) && m.closed();
}

// Whether the text is taken (as a prefix).
bool takes(const JsonGrammar& g, std::string_view text) {
  JsonMatcher m(g);
  return m.feed(text);
}

TEST(JsonMatcher, FollowsTheSchema) {
  auto g = grammar(kPerson);
  EXPECT_TRUE(closes(*g, R"({"name":"Ann","age":41,"colours":["red"],"home":{"city":"Oslo"}})"));
  EXPECT_TRUE(closes(*g, R"({"name":"Ann","age":-3,"colours":["red","blue"],"home":{"city":"Oslo","zip":null},"score":-0.5e+3})"));
  EXPECT_TRUE(closes(*g, "{\n  \"name\": \"\\u00e9\\n\\\"\",\n  \"age\": 0,\n  \"colours\": [ \"green\" ],\n  \"home\": {\"city\": \"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\", \"zip\": 7}\n}"));
  EXPECT_FALSE(takes(*g, R"({"age")")) << "name is required first";
  EXPECT_FALSE(takes(*g, R"({"name":1)"));
  EXPECT_FALSE(takes(*g, R"({"name":"a","age":1.5)")) << "an integer has no fraction";
  EXPECT_FALSE(takes(*g, R"({"name":"a","age":01)")) << "no leading zero";
  EXPECT_FALSE(takes(*g, R"({"name":"a","age":1,"colours":[])")) << "minItems 1";
  EXPECT_FALSE(takes(*g, R"({"name":"a","age":1,"colours":["red","red","red",)")) << "maxItems 3";
  EXPECT_FALSE(takes(*g, R"({"name":"a","age":1,"colours":["pink")"));
  EXPECT_FALSE(takes(*g, R"({"name":"a","age":1,"colours":["red"],"home":{}})")) << "city is required";
  EXPECT_FALSE(takes(*g, R"({"name":"a","age":1,"colours":["red"],"home":{"city":"x"}})" " ")) << "nothing after the value";
  EXPECT_FALSE(takes(*g, R"({"name":"0123456789abc")")) << "maxLength 12";
  EXPECT_FALSE(takes(*g, "{\"name\":\"a\nb")) << "a control byte in a string";
  EXPECT_FALSE(takes(*g, "{\"name\":\"\xc0\xaf")) << "an overlong UTF-8 form";
  EXPECT_FALSE(takes(*g, "{\"name\":\"\xed\xa0\x80")) << "a UTF-16 surrogate in UTF-8";
  EXPECT_FALSE(takes(*g, R"({"name":"\x")")) << "an unknown escape";
  EXPECT_FALSE(takes(*g, R"( {)")) << "nothing before the value";
  EXPECT_TRUE(takes(*g, "{\r\n" + std::string(JsonMatcher::kMaxIndent, ' ') + "\"name\":\t\"x\" ,\n  \"age\""));
  EXPECT_FALSE(takes(*g, "{" + std::string(JsonMatcher::kMaxIndent + 1, ' '))) << "indentation is bounded";
  EXPECT_FALSE(takes(*g, "{\n\n")) << "one line break per gap";
  EXPECT_FALSE(takes(*g, "{\r ")) << "a \\r only before its \\n";
}

TEST(JsonMatcher, NumbersAndLiteralsEndAtTheNextByteOrAtTheEnd) {
  auto number = grammar(R"({"type":"number"})");
  JsonMatcher m(*number);
  ASSERT_TRUE(m.feed("12.5"));
  EXPECT_TRUE(m.accepting());
  EXPECT_FALSE(m.closed()) << "a number could still grow";
  EXPECT_FALSE(JsonMatcher(m).feed("x"));
  ASSERT_TRUE(m.feed("e"));
  EXPECT_FALSE(m.accepting());
  auto ids = grammar(R"({"type":"array","items":{"enum":[1,12,"x"]}})");
  EXPECT_TRUE(closes(*ids, "[1,12,\"x\",1]"));
  EXPECT_FALSE(takes(*ids, "[13"));
  auto any = JsonGrammar::any_object();
  EXPECT_TRUE(closes(*any, R"({"a":[1,{"b":null},"c",true,-2.5E-3],"d":{}})"));
  EXPECT_FALSE(takes(*any, "[1]")) << "json_object: an object";
  EXPECT_FALSE(takes(*any, R"({"a":tru1)"));
}

TEST(JsonMatcher, ToolCallsFollowTheChosenFunctionsSchema) {
  const auto weather = ojson::parse(R"({"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}},"required":["city"]})");
  const auto time = ojson::parse(R"({"type":"object","properties":{"zone":{"enum":["UTC","CET"]}},"required":["zone"]})");
  auto g = JsonGrammar::tool_call({{"get_weather", &weather}, {"get_time", &time}, {"get", nullptr}}, "<tool_call>\n{\"name\": \"",
                                  "\", \"arguments\": ", "}\n</tool_call>");
  ASSERT_TRUE(g) << g.error().message;
  EXPECT_TRUE(closes(**g, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\":\"Oslo\",\"days\":3}}\n</tool_call>"));
  EXPECT_TRUE(closes(**g, "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"zone\": \"CET\"}}\n</tool_call>"));
  EXPECT_TRUE(closes(**g, "<tool_call>\n{\"name\": \"get\", \"arguments\": {\"x\": [1]}}\n</tool_call>"));
  EXPECT_FALSE(takes(**g, "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"city\"")) << "another function's arguments";
  EXPECT_FALSE(takes(**g, "<tool_call>\n{\"name\": \"get_date")) << "no such function";
  EXPECT_FALSE(takes(**g, "Sure! <tool_call>")) << "the call and nothing else";
  JsonMatcher m(**g);
  ASSERT_TRUE(m.feed("<tool_call>\n{\"name\": \"get_w"));
  EXPECT_EQ(m.bytes_to_close(), std::string("eather\", \"arguments\": {\"city\":\"\"}}\n</tool_call>").size());
  const auto bad = ojson::parse(R"({"type":"string","pattern":"x"})");
  auto refused = JsonGrammar::tool_call({{"f", &bad}}, "<", ">", "</>");
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("(function f)"), std::string::npos) << refused.error().message;
}

// From every prefix of valid texts, bytes_to_close is exact: some byte brings it down by
// one, until the value closes.
TEST(JsonMatcher, BytesToCloseIsAlwaysReachable) {
  for (const auto& [schema, text] : std::vector<std::pair<const char*, std::string>>{
           {kPerson, R"({"name":"Ann","age":41,"colours":["red","blue"],"home":{"city":"Oslo","zip":12},"score":1.5e3})"},
           {R"({"type":"object"})", R"({"a":[1,{"b":null}],"c":"x\u00e9y"})"},
           {R"({"type":"array","items":{"type":"string","minLength":2},"minItems":2})", R"(["abc","de"])"}}) {
    auto g = grammar(schema);
    for (size_t cut = 0; cut <= text.size(); ++cut) {
      JsonMatcher m(*g);
      ASSERT_TRUE(m.feed(std::string_view(text).substr(0, cut))) << text.substr(0, cut);
      const auto closing = test::close_step_by_step(m);
      ASSERT_TRUE(closing) << "stuck after " << text.substr(0, cut);
      EXPECT_TRUE(m.closed() || m.accepting()) << text.substr(0, cut) << *closing;
      EXPECT_TRUE(nlohmann::json::accept(text.substr(0, cut) + *closing)) << text.substr(0, cut) << *closing;
    }
  }
}

// Random walks (any byte the matcher takes, then the shortest close) always give JSON that
// satisfies the schema.
TEST(JsonMatcher, RandomWalksGiveValidValues) {
  auto g = grammar(kPerson);
  std::mt19937 rng(7);
  const std::string alphabet = "{}[]\",:0123456789.-+eEabcdefghijklmnopqrstuvwxyz \n\\u\xc3\xa9";
  for (int walk = 0; walk < 200; ++walk) {
    const auto walked = test::random_value(*g, rng, alphabet, 80);
    ASSERT_TRUE(walked) << "walk " << walk;
    const std::string& text = *walked;
    const auto value = nlohmann::json::parse(text, nullptr, false);
    ASSERT_FALSE(value.is_discarded()) << text;
    ASSERT_TRUE(value.is_object()) << text;
    EXPECT_TRUE(value["name"].is_string() && value["name"].get<std::string>().size() <= 2 * 12) << text;
    EXPECT_TRUE(value["age"].is_number_integer()) << text;
    ASSERT_TRUE(value["colours"].is_array()) << text;
    EXPECT_GE(value["colours"].size(), 1u);
    EXPECT_LE(value["colours"].size(), 3u);
    for (const auto& c : value["colours"]) EXPECT_TRUE(c == "red" || c == "green" || c == "blue") << text;
    ASSERT_TRUE(value["home"].is_object()) << text;
    EXPECT_TRUE(value["home"]["city"].is_string()) << text;
    if (value["home"].contains("zip")) { EXPECT_TRUE(value["home"]["zip"].is_null() || value["home"]["zip"].is_number_integer()) << text; }
    if (value.contains("score")) { EXPECT_TRUE(value["score"].is_number()) << text; }
  }
}

}  // namespace
}  // namespace larql
