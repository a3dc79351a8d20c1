// Gemma 4's tool-call value syntax: written as its template writes it, read back into JSON,
// and matched byte by byte under a function's schema (JsonGrammar with ValueSyntax::gemma4).
#include "constrain/gemma4_syntax.h"

#include <random>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "constrain/json_matcher.h"
#include "constrain/matcher_walks.h"

namespace larql {
namespace {

using ojson = nlohmann::ordered_json;

constexpr const char* kWeather = R"({"type":"object","properties":{
  "city":{"type":"string","minLength":1},
  "days":{"type":"integer"},
  "units":{"enum":["celsius","fahrenheit"]},
  "hours":{"type":"array","items":{"type":"number"},"maxItems":3}},
  "required":["city"]})";

std::shared_ptr<const JsonGrammar> weather_call() {
  static const ojson schema = ojson::parse(kWeather);
  auto g = JsonGrammar::tool_call({{"get_weather", &schema}, {"ping", nullptr}}, "<|tool_call>call:", "", "<tool_call|>",
                                  ValueSyntax::gemma4);
  EXPECT_TRUE(g) << g.error().message;
  return *g;
}

bool closes(const JsonGrammar& g, std::string_view text) {
  JsonMatcher m(g);
  return m.feed(text) && m.closed();
}

bool takes(const JsonGrammar& g, std::string_view text) {
  JsonMatcher m(g);
  return m.feed(text);
}

TEST(Gemma4Syntax, WritesAsTheTemplateAndReadsBackTheSameValue) {
  const auto value = ojson::parse(R"({"zeta":1,"Alpha":"a \"quoted\" <b> \\ text","list":[true,false,null,2.5],"nested":{"y":"z"}})");
  const std::string text = gemma4_text(value, false);
  EXPECT_EQ(text, "{Alpha:<|\"|>a \"quoted\" <b> \\ text<|\"|>,list:[true,false,None,2.5],nested:{y:<|\"|>z<|\"|>},zeta:1}")
      << "keys in dictsort's order (case ignored), strings raw between marks, null as Jinja prints None";
  EXPECT_EQ(gemma4_text(ojson::parse(R"({"k":["v"]})"), true), "{<|\"|>k<|\"|>:[<|\"|>v<|\"|>]}") << "declarations quote keys";
  auto back = gemma4_to_json(text);
  ASSERT_TRUE(back);
  EXPECT_EQ(nlohmann::json::parse(*back), nlohmann::json::parse(value.dump()));
  EXPECT_EQ(gemma4_to_json(" { a : 1 , b:<|\"|>x<|\"|> } "), R"({"a":1,"b":"x"})") << "spaces between parts";
  for (const char* bad : {"{a:1", "{a 1}", "<|\"|>open", "{a:1}}", "[1,]", "{:1}", "tru", "1 2"})
    EXPECT_FALSE(gemma4_to_json(bad)) << bad;
}

TEST(Gemma4Syntax, CallsFollowTheChosenFunctionsSchema) {
  auto g = weather_call();
  EXPECT_TRUE(closes(*g, "<|tool_call>call:get_weather{city:<|\"|>Oslo<|\"|>,days:3,units:<|\"|>celsius<|\"|>}<tool_call|>"));
  EXPECT_TRUE(closes(*g, "<|tool_call>call:get_weather{city:<|\"|>a<b <|x \"q\" \\ <|\"<|\"|>}<tool_call|>"))
      << "a mark's start is text when the mark breaks off";
  EXPECT_TRUE(closes(*g, "<|tool_call>call:get_weather{city:<|\"|>x<|\"|>,hours:[1,2.5]}<tool_call|>"));
  EXPECT_TRUE(closes(*g, "<|tool_call>call:ping{}<tool_call|>"));
  EXPECT_TRUE(closes(*g, "<|tool_call>call:ping{a:<|\"|>b<|\"|>,n:[1,{c:null}]}<tool_call|>")) << "any object: bare keys";
  EXPECT_FALSE(takes(*g, "<|tool_call>call:get_weather{days:3")) << "city is required first";
  EXPECT_FALSE(takes(*g, "<|tool_call>call:get_weather{city:<|\"|><|\"|>")) << "minLength 1";
  EXPECT_FALSE(takes(*g, "<|tool_call>call:get_weather{\"city\"")) << "keys are bare";
  EXPECT_FALSE(takes(*g, "<|tool_call>call:get_weather{city:\"Oslo\"")) << "strings are between marks";
  EXPECT_FALSE(takes(*g, "<|tool_call>call:get_weather{city:<|\"|>x<|\"|>,units:<|\"|>kelvin")) << "an enum";
  EXPECT_FALSE(takes(*g, "<|tool_call>call:get_weather{city:<|\"|>x<|\"|>,hours:[1,2,3,4")) << "maxItems";
  EXPECT_FALSE(takes(*g, "<|tool_call>call:ping{:")) << "a key has a byte";
}

// From every prefix of valid calls, bytes_to_close is exact: some byte brings it down by one
// until the call closes, and the closed text reads back as the schema's value.
TEST(Gemma4Syntax, BytesToCloseIsAlwaysReachable) {
  auto g = weather_call();
  for (const std::string text : {"<|tool_call>call:get_weather{city:<|\"|>O<|slo<|\"|>,days:-3,hours:[1.5]}<tool_call|>",
                                 "<|tool_call>call:ping{ab:[<|\"|><|\"|>,{c:1}]}<tool_call|>"}) {
    for (size_t cut = 0; cut <= text.size(); ++cut) {
      JsonMatcher m(*g);
      ASSERT_TRUE(m.feed(std::string_view(text).substr(0, cut))) << text.substr(0, cut);
      const auto closing = test::close_step_by_step(m);
      ASSERT_TRUE(closing) << "stuck after " << text.substr(0, cut);
      EXPECT_TRUE(m.closed()) << text.substr(0, cut) << *closing;
    }
  }
}

// Random walks through the grammar, then the shortest close, always give calls whose
// arguments read back as JSON that satisfies the schema.
TEST(Gemma4Syntax, RandomWalksGiveValidCalls) {
  auto g = weather_call();
  std::mt19937 rng(11);
  const std::string alphabet = "{}[]<|\">:,0123456789.-eacdgilnopstuwyhr_ \\\xc3\xa9";
  const std::string open = "<|tool_call>call:", close = "<tool_call|>";
  for (int walk = 0; walk < 200; ++walk) {
    const auto text = test::random_value(*g, rng, alphabet, 90);
    ASSERT_TRUE(text) << "walk " << walk;
    ASSERT_EQ(text->rfind(open, 0), 0u) << *text;
    ASSERT_TRUE(text->ends_with(close)) << *text;
    const std::string call = text->substr(open.size(), text->size() - open.size() - close.size());
    const size_t brace = call.find('{');
    ASSERT_NE(brace, std::string::npos) << *text;
    const std::string name = call.substr(0, brace);
    auto arguments = gemma4_to_json(call.substr(brace));
    ASSERT_TRUE(arguments) << *text;
    const auto value = nlohmann::json::parse(*arguments);
    ASSERT_TRUE(value.is_object()) << *text;
    if (name == "ping") continue;
    ASSERT_EQ(name, "get_weather") << *text;
    ASSERT_TRUE(value.contains("city") && value["city"].is_string()) << *text;
    EXPECT_FALSE(value["city"].get<std::string>().empty()) << *text;
    if (value.contains("days")) { EXPECT_TRUE(value["days"].is_number_integer()) << *text; }
    if (value.contains("units")) { EXPECT_TRUE(value["units"] == "celsius" || value["units"] == "fahrenheit") << *text; }
    if (value.contains("hours")) { EXPECT_LE(value["hours"].size(), 3u) << *text; }
  }
}

TEST(Gemma4Syntax, KeysTheSyntaxCannotWriteAreRefused) {
  const auto schema = ojson::parse(R"({"type":"object","properties":{"a:b":{"type":"string"}}})");
  auto g = JsonGrammar::tool_call({{"f", &schema}}, "<|tool_call>call:", "", "<tool_call|>", ValueSyntax::gemma4);
  ASSERT_FALSE(g);
  EXPECT_NE(g.error().message.find("cannot write a key that is empty or holds ':' or '}'"), std::string::npos) << g.error().message;
}

}  // namespace
}  // namespace larql
