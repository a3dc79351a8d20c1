// A JSON schema (the subset structured-output clients send) compiled into the grammar the
// byte matcher walks: objects with properties and required, arrays, strings (enum, length),
// numbers, integers, booleans, null, const/enum, anyOf/type lists whose alternatives begin
// with different bytes, and $ref into the same document. Any other keyword that constrains
// a value is refused by name; annotations (title, description, examples…) are ignored.
//
// Objects are written with their properties in the schema's order, each optional one
// either written or skipped: one canonical order keeps the matcher deterministic, and any
// such object validates.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "base/errors.h"

namespace larql {

// How values are spelled: JSON, or Gemma 4's tool-call syntax (constrain/gemma4_syntax.h:
// strings between <|"|> marks, raw; bare object keys followed by ':'; the rest as JSON).
enum class ValueSyntax : uint8_t { json, gemma4 };

enum class SchemaKind : uint8_t {
  object,    // properties in order (open: any string keys, any values)
  array,     // items of one node
  string,    // any string of min..max characters
  number,    // any JSON number
  integer,   // a JSON number without fraction or exponent
  literals,  // one of a few JSON values, written compactly (enum, const, true/false/null)
  any_of,    // one alternative, chosen by the value's first byte
  any,       // any JSON value (json_object mode's values)
  wrapped,   // one of several texts around a value: literals[i], value alternatives[i], then suffix
             // (a tool call: the format's opening and the function's name, its arguments, the closing)
};

struct SchemaProperty {
  std::string key;  // the name as written: between the quotes (JSON-escaped), or Gemma 4's bare key
  uint32_t value = 0;
  bool required = false;
};

struct SchemaNode {
  SchemaKind kind = SchemaKind::any;
  bool open = false;                        // object: any keys and values (json_object)
  std::vector<SchemaProperty> properties;   // object
  uint32_t items = 0;                       // array
  size_t min_items = 0, max_items = std::numeric_limits<size_t>::max();
  size_t min_length = 0, max_length = std::numeric_limits<size_t>::max();  // string, in characters
  std::vector<std::string> literals;        // literals: compact JSON texts
  std::vector<uint32_t> alternatives;       // any_of; wrapped: the value after each literal
  std::string suffix;                       // wrapped
  // Derived by compile: the bytes that can start the value, the fewest bytes it can take,
  // and for objects the fewest bytes the required properties from i on take, each with its
  // comma ("required_tail[i]"), and the shortest property entry from i on.
  std::array<uint64_t, 4> first_bytes{};
  size_t min_bytes = 0;
  std::vector<size_t> required_tail, shortest_entry_from;
};

class JsonGrammar {
 public:
  static constexpr size_t kMaxNodes = 4096;     // a schema larger than this is refused
  static constexpr size_t kMaxProperties = 64;  // per object (the matcher's key window)
  static constexpr size_t kMaxLiterals = 64;    // per enum
  static constexpr size_t kMaxDepth = 32;       // nesting of written values

  // response_format json_schema's "schema"; errors name the keyword and where it is.
  static Result<std::shared_ptr<const JsonGrammar>> from_schema(const nlohmann::ordered_json& schema);
  // response_format json_object: any object.
  static std::shared_ptr<const JsonGrammar> any_object();
  // A tool call in a chat format's words: `before` + the name + `between`, then arguments
  // of that function's schema in `syntax`, then `after`. Errors name the function.
  struct Function {
    std::string name;             // as written (JSON-escaped)
    nlohmann::ordered_json const* parameters;  // its schema; null: any object
  };
  static Result<std::shared_ptr<const JsonGrammar>> tool_call(const std::vector<Function>& functions, std::string_view before,
                                                              std::string_view between, std::string_view after,
                                                              ValueSyntax syntax = ValueSyntax::json);

  ValueSyntax syntax() const { return syntax_; }

  const SchemaNode& node(uint32_t i) const { return nodes_[i]; }
  uint32_t root() const { return root_; }
  // Built-in nodes every grammar has (what an `any` value turns into at its first byte).
  uint32_t any_string() const { return any_string_; }
  uint32_t any_number() const { return any_number_; }
  uint32_t any_literal() const { return any_literal_; }   // true, false, null
  uint32_t any_object_node() const { return any_object_; }
  uint32_t any_array() const { return any_array_; }
  uint32_t any_value() const { return any_value_; }

  static bool starts(const SchemaNode& n, uint8_t byte) { return n.first_bytes[byte >> 6] >> (byte & 63) & 1; }

 private:
  friend class SchemaCompiler;
  JsonGrammar();
  Status derive();  // first bytes, shortest lengths; refuses what the matcher cannot follow

  std::vector<SchemaNode> nodes_;
  uint32_t root_ = 0;
  ValueSyntax syntax_ = ValueSyntax::json;
  uint32_t any_string_ = 0, any_number_ = 0, any_literal_ = 0, any_object_ = 0, any_array_ = 0, any_value_ = 0;
};

}  // namespace larql
