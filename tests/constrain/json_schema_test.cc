#include "constrain/json_schema.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace larql {
namespace {

using ojson = nlohmann::ordered_json;

std::string refusal(const char* schema) {
  auto g = JsonGrammar::from_schema(ojson::parse(schema));
  return g ? std::string("(compiled)") : g.error().message;
}

TEST(JsonSchema, RefusesWhatItCannotFollowNamingTheKeywordAndWhere) {
  EXPECT_NE(refusal(R"({"type":"string","pattern":"^a"})").find("'pattern'"), std::string::npos);
  EXPECT_NE(refusal(R"({"type":"object","properties":{"d":{"type":"string","format":"date"}}})").find("/properties/d: the keyword 'format'"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"type":"integer","minimum":0})").find("'minimum'"), std::string::npos);
  EXPECT_NE(refusal(R"({"type":"decimal"})").find("'decimal'"), std::string::npos);
  EXPECT_NE(refusal(R"({"$ref":"#/$defs/missing"})").find("names nothing"), std::string::npos);
  EXPECT_NE(refusal(R"({"$ref":"https://example.com/s.json"})").find("within the document"), std::string::npos);
  EXPECT_NE(refusal(R"({"type":"object","properties":{"a":{}},"required":["b"]})").find("'b' is required"), std::string::npos);
  EXPECT_NE(refusal(R"({"anyOf":[{"type":"object","properties":{"a":{}}},{"type":"object","properties":{"b":{}}}]})")
                .find("begin with different characters"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"type":"string","minLength":3,"maxLength":2})").find("minLength is above maxLength"), std::string::npos);
  EXPECT_NE(refusal("false").find("admits no value"), std::string::npos);
  // A required property that recurses without end has no finite value.
  EXPECT_NE(refusal(R"({"$defs":{"n":{"type":"object","properties":{"next":{"$ref":"#/$defs/n"}},"required":["next"]}},"$ref":"#/$defs/n"})")
                .find("no finite value"),
            std::string::npos);
}

TEST(JsonSchema, LimitsAreNamed) {
  ojson props = ojson::object();
  for (int i = 0; i < 65; ++i) props["p" + std::to_string(i)] = {{"type", "integer"}};
  auto wide = JsonGrammar::from_schema({{"type", "object"}, {"properties", props}});
  ASSERT_FALSE(wide);
  EXPECT_NE(wide.error().message.find("more than 64 properties"), std::string::npos);
  ojson values = ojson::array();
  for (int i = 0; i < 65; ++i) values.push_back(i);
  auto long_enum = JsonGrammar::from_schema({{"enum", values}});
  ASSERT_FALSE(long_enum);
  EXPECT_NE(long_enum.error().message.find("more than 64 values"), std::string::npos);
  ojson deep = {{"type", "string"}};
  for (int i = 0; i < 70; ++i) deep = {{"type", "array"}, {"items", deep}};
  auto too_deep = JsonGrammar::from_schema(deep);
  ASSERT_FALSE(too_deep);
  EXPECT_NE(too_deep.error().message.find("deeper than 64 levels"), std::string::npos);
}

TEST(JsonSchema, ShortestValuesCountRequiredPropertiesOnly) {
  auto g = JsonGrammar::from_schema(ojson::parse(
      R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"},"note":{"type":"string"}},
          "required":["name","age"]})"));
  ASSERT_TRUE(g) << g.error().message;
  EXPECT_EQ((*g)->node((*g)->root()).min_bytes, std::string(R"({"name":"","age":0})").size());
  auto list = JsonGrammar::from_schema(ojson::parse(R"({"type":"array","items":{"enum":["red","green"]},"minItems":2})"));
  ASSERT_TRUE(list);
  EXPECT_EQ((*list)->node((*list)->root()).min_bytes, std::string(R"(["red","red"])").size());
  // Annotations are ignored; a recursive optional property is fine.
  auto tree = JsonGrammar::from_schema(ojson::parse(
      R"({"title":"t","description":"d","$defs":{"n":{"type":"object","properties":{"kids":{"type":"array","items":{"$ref":"#/$defs/n"}}}}},
          "$ref":"#/$defs/n"})"));
  ASSERT_TRUE(tree) << tree.error().message;
  EXPECT_EQ((*tree)->node((*tree)->root()).min_bytes, 2u);
}

}  // namespace
}  // namespace larql
