#include "constrain/json_schema.h"

#include <algorithm>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "constrain/gemma4_syntax.h"

namespace larql {

using json = nlohmann::ordered_json;  // the schema's own property order is the order written

namespace {

constexpr size_t kInfinite = size_t{1} << 40;  // a value no finite text reaches

size_t add(size_t a, size_t b) { return std::min(kInfinite, a + b); }

// Keywords that only describe a value: ignored. Every other keyword must be understood.
const std::set<std::string> kAnnotations = {"title", "description", "default", "examples", "$schema", "$id", "$comment",
                                            "deprecated", "readOnly", "writeOnly", "$defs", "definitions"};

void set_byte(std::array<uint64_t, 4>& set, uint8_t b) { set[b >> 6] |= uint64_t{1} << (b & 63); }

std::array<uint64_t, 4> bytes_of(std::string_view chars) {
  std::array<uint64_t, 4> s{};
  for (char c : chars) set_byte(s, uint8_t(c));
  return s;
}

SchemaNode node_of(SchemaKind kind) {
  SchemaNode n;
  n.kind = kind;
  return n;
}

SchemaNode literal_node(std::vector<std::string> texts) {
  SchemaNode n = node_of(SchemaKind::literals);
  n.literals = std::move(texts);
  return n;
}

Error refuse(const std::string& where, const std::string& what) {
  return make_error(ErrorCode::bad_request, "json_schema" + where + ": " + what);
}

}  // namespace

// Walks the schema document, one node per schema position ($ref targets once each, so a
// recursive schema is a cycle of nodes).
class SchemaCompiler {
 public:
  SchemaCompiler(JsonGrammar& g, const json& doc) : g_(g), doc_(doc) {}

  Result<uint32_t> compile(const json& s, const std::string& where, size_t depth) {
    if (depth > 64) return refuse(where, "nested deeper than 64 levels");
    if (g_.nodes_.size() >= JsonGrammar::kMaxNodes)
      return refuse(where, "the schema has more than " + std::to_string(JsonGrammar::kMaxNodes) + " parts");
    if (s.is_boolean()) {
      if (!s.get<bool>()) return refuse(where, "the schema false admits no value");
      return g_.any_value_;
    }
    if (!s.is_object()) return refuse(where, "a schema must be an object or a boolean, not " + std::string(s.type_name()));
    if (s.contains("$ref")) return reference(s, where, depth);
    for (const auto& [key, value] : s.items())
      if (!kAnnotations.count(key) && !kUnderstood.count(key)) return refuse(where, "the keyword '" + key + "' is not supported");
    if (s.contains("enum") || s.contains("const")) return literals(s, where);
    for (const char* alternatives : {"anyOf", "oneOf"})
      if (s.contains(alternatives)) return any_of(s[alternatives], where + "/" + alternatives, depth);
    if (s.contains("allOf")) {
      const json& all = s["allOf"];
      if (!all.is_array() || all.size() != 1) return refuse(where + "/allOf", "only an allOf of one schema is supported");
      return compile(all[0], where + "/allOf/0", depth + 1);
    }
    if (!s.contains("type")) {
      // The type is implied by the keywords of one kind, or any value.
      if (s.contains("properties")) return typed(s, "object", where, depth);
      if (s.contains("items")) return typed(s, "array", where, depth);
      return g_.any_value_;
    }
    const json& type = s["type"];
    if (type.is_string()) return typed(s, type.get<std::string>(), where, depth);
    if (!type.is_array() || type.empty() || !std::all_of(type.begin(), type.end(), [](const json& t) { return t.is_string(); }))
      return refuse(where + "/type", "type must be a string or a non-empty array of strings");
    SchemaNode alternatives = node_of(SchemaKind::any_of);
    for (const auto& t : type) {
      auto alt = typed(s, t.get<std::string>(), where, depth);
      if (!alt) return alt.error();
      alternatives.alternatives.push_back(*alt);
    }
    return add_node(std::move(alternatives));
  }

 private:
  static inline const std::set<std::string> kUnderstood = {
      "type", "properties", "required", "additionalProperties", "items", "minItems", "maxItems",
      "minLength", "maxLength", "enum", "const", "anyOf", "oneOf", "allOf", "$ref"};

  uint32_t add_node(SchemaNode n) {
    g_.nodes_.push_back(std::move(n));
    return uint32_t(g_.nodes_.size() - 1);
  }

  Result<uint32_t> reference(const json& s, const std::string& where, size_t depth) {
    if (s.size() != 1 && std::any_of(s.items().begin(), s.items().end(), [](const auto& kv) {
          return kv.key() != "$ref" && !kAnnotations.count(kv.key());
        }))
      return refuse(where, "keywords beside $ref are not supported");
    if (!s["$ref"].is_string()) return refuse(where + "/$ref", "$ref must be a string");
    const std::string ref = s["$ref"].get<std::string>();
    if (ref.rfind("#", 0) != 0) return refuse(where + "/$ref", "only references within the document (#/...) are supported, not '" + ref + "'");
    if (auto known = refs_.find(ref); known != refs_.end()) return known->second;
    const json* target = &doc_;
    try {
      target = &doc_.at(json::json_pointer(ref.substr(1)));
    } catch (const json::exception&) {
      return refuse(where + "/$ref", "'" + ref + "' names nothing in the schema");
    }
    // A placeholder first, so a reference back to this one (recursion) finds it.
    const uint32_t placeholder = add_node(node_of(SchemaKind::any_of));
    refs_[ref] = placeholder;
    auto target_node = compile(*target, ref.substr(1), depth + 1);
    if (!target_node) return target_node.error();
    g_.nodes_[placeholder].alternatives = {*target_node};
    return placeholder;
  }

  // A value's text as the grammar's syntax writes it (compact JSON, or Gemma 4's).
  std::string text_of(const json& v) const { return g_.syntax_ == ValueSyntax::gemma4 ? gemma4_text(v, false) : v.dump(); }

  Result<uint32_t> literals(const json& s, const std::string& where) {
    SchemaNode n = node_of(SchemaKind::literals);
    if (s.contains("const")) {
      n.literals.push_back(text_of(s["const"]));
    } else {
      const json& values = s["enum"];
      if (!values.is_array() || values.empty()) return refuse(where + "/enum", "enum must be a non-empty array");
      if (values.size() > JsonGrammar::kMaxLiterals)
        return refuse(where + "/enum", "an enum of more than " + std::to_string(JsonGrammar::kMaxLiterals) + " values");
      for (const auto& v : values) n.literals.push_back(text_of(v));
    }
    return add_node(std::move(n));
  }

  Result<uint32_t> any_of(const json& alternatives, const std::string& where, size_t depth) {
    if (!alternatives.is_array() || alternatives.empty()) return refuse(where, "must be a non-empty array of schemas");
    SchemaNode n = node_of(SchemaKind::any_of);
    for (size_t i = 0; i < alternatives.size(); ++i) {
      auto alt = compile(alternatives[i], where + "/" + std::to_string(i), depth + 1);
      if (!alt) return alt.error();
      n.alternatives.push_back(*alt);
    }
    return add_node(std::move(n));
  }

  static Result<size_t> count(const json& s, const char* key, const std::string& where) {
    if (!s.contains(key)) return size_t{0};
    const json& v = s[key];
    if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0))
      return refuse(where + "/" + key, std::string(key) + " must be a non-negative integer");
    return v.get<size_t>();
  }

  // A lower and an upper count (minLength/maxLength, minItems/maxItems); `hi` is left as it
  // is (unbounded) when its keyword is absent.
  static Status bounds(const json& s, const char* min_key, const char* max_key, const std::string& where, size_t& lo, size_t& hi) {
    auto low = count(s, min_key, where);
    if (!low) return low.error();
    auto high = count(s, max_key, where);
    if (!high) return high.error();
    lo = *low;
    if (s.contains(max_key)) hi = *high;
    if (lo > hi) return refuse(where, std::string(min_key) + " is above " + max_key);
    return Ok{};
  }

  // Keywords of a kind the value is not do not apply to it (JSON Schema's rule), so a
  // type list shares one schema object.
  Result<uint32_t> typed(const json& s, const std::string& type, const std::string& where, size_t depth) {
    if (type == "string") {
      SchemaNode n = node_of(SchemaKind::string);
      if (auto b = bounds(s, "minLength", "maxLength", where, n.min_length, n.max_length); !b) return b.error();
      return add_node(std::move(n));
    }
    if (type == "number") return add_node(node_of(SchemaKind::number));
    if (type == "integer") return add_node(node_of(SchemaKind::integer));
    if (type == "boolean") return add_node(literal_node({"true", "false"}));
    if (type == "null") return add_node(literal_node({"null"}));
    if (type == "array") {
      SchemaNode n = node_of(SchemaKind::array);
      if (auto b = bounds(s, "minItems", "maxItems", where, n.min_items, n.max_items); !b) return b.error();
      n.items = g_.any_value_;
      if (s.contains("items")) {
        auto items = compile(s["items"], where + "/items", depth + 1);
        if (!items) return items.error();
        n.items = *items;
      }
      return add_node(std::move(n));
    }
    if (type == "object") {
      if (!s.contains("properties")) {
        if (s.contains("required") && !s["required"].empty()) return refuse(where, "required names properties the schema does not define");
        return g_.any_object_;
      }
      const json& props = s["properties"];
      if (!props.is_object()) return refuse(where + "/properties", "properties must be an object");
      if (props.size() > JsonGrammar::kMaxProperties)
        return refuse(where + "/properties", "an object of more than " + std::to_string(JsonGrammar::kMaxProperties) + " properties");
      std::set<std::string> required;
      if (s.contains("required")) {
        const json& r = s["required"];
        if (!r.is_array() || !std::all_of(r.begin(), r.end(), [](const json& x) { return x.is_string(); }))
          return refuse(where + "/required", "required must be an array of strings");
        for (const auto& name : r) {
          if (!props.contains(name.get<std::string>()))
            return refuse(where + "/required", "'" + name.get<std::string>() + "' is required but not among the properties");
          required.insert(name.get<std::string>());
        }
      }
      if (s.contains("additionalProperties") && !s["additionalProperties"].is_boolean() && !s["additionalProperties"].is_object())
        return refuse(where + "/additionalProperties", "additionalProperties must be a boolean or a schema");
      SchemaNode n = node_of(SchemaKind::object);
      for (const auto& [name, schema] : props.items()) {
        auto value = compile(schema, where + "/properties/" + name, depth + 1);
        if (!value) return value.error();
        if (g_.syntax_ == ValueSyntax::gemma4) {  // a bare key ends at the first ':'
          if (name.empty() || name.find_first_of(":}") != std::string::npos)
            return refuse(where + "/properties/" + name, "Gemma 4's calls cannot write a key that is empty or holds ':' or '}'");
          n.properties.push_back({name, *value, required.count(name) > 0});
          continue;
        }
        const std::string quoted = json(name).dump();
        n.properties.push_back({quoted.substr(1, quoted.size() - 2), *value, required.count(name) > 0});
      }
      return add_node(std::move(n));
    }
    return refuse(where + "/type", "the type '" + type + "' is not one of string, number, integer, boolean, null, array, object");
  }

  JsonGrammar& g_;
  const json& doc_;
  std::map<std::string, uint32_t> refs_;
};

JsonGrammar::JsonGrammar() {
  auto push = [&](SchemaNode n) {
    nodes_.push_back(std::move(n));
    return uint32_t(nodes_.size() - 1);
  };
  any_value_ = push(node_of(SchemaKind::any));
  any_string_ = push(node_of(SchemaKind::string));
  any_number_ = push(node_of(SchemaKind::number));
  any_literal_ = push(literal_node({"true", "false", "null"}));
  SchemaNode object = node_of(SchemaKind::object);
  object.open = true;
  any_object_ = push(std::move(object));
  SchemaNode array = node_of(SchemaKind::array);
  array.items = any_value_;
  any_array_ = push(std::move(array));
}

Result<std::shared_ptr<const JsonGrammar>> JsonGrammar::from_schema(const json& schema) {
  auto g = std::shared_ptr<JsonGrammar>(new JsonGrammar());
  SchemaCompiler compiler(*g, schema);
  auto root = compiler.compile(schema, "", 0);
  if (!root) return root.error();
  g->root_ = *root;
  if (auto s = g->derive(); !s) return s.error();
  return std::shared_ptr<const JsonGrammar>(std::move(g));
}

Result<std::shared_ptr<const JsonGrammar>> JsonGrammar::tool_call(const std::vector<Function>& functions, std::string_view before,
                                                                  std::string_view between, std::string_view after,
                                                                  ValueSyntax syntax) {
  if (functions.empty() || functions.size() > kMaxLiterals)
    return make_error(ErrorCode::bad_request, "tool_call: between 1 and " + std::to_string(kMaxLiterals) + " functions");
  if (after.empty()) return make_error(ErrorCode::internal, "tool_call: a call must end with a closing text");
  auto g = std::shared_ptr<JsonGrammar>(new JsonGrammar());
  g->syntax_ = syntax;
  SchemaNode call = node_of(SchemaKind::wrapped);
  call.suffix = std::string(after);
  for (const auto& f : functions) {
    uint32_t arguments = g->any_object_;
    if (f.parameters) {
      SchemaCompiler compiler(*g, *f.parameters);  // each schema is its own document for its $refs
      auto node = compiler.compile(*f.parameters, "(function " + f.name + ")", 0);
      if (!node) return node.error();
      arguments = *node;
    }
    call.literals.push_back(std::string(before) + f.name + std::string(between));
    call.alternatives.push_back(arguments);
  }
  g->nodes_.push_back(std::move(call));
  g->root_ = uint32_t(g->nodes_.size() - 1);
  if (auto s = g->derive(); !s) return s.error();
  return std::shared_ptr<const JsonGrammar>(std::move(g));
}

std::shared_ptr<const JsonGrammar> JsonGrammar::any_object() {
  auto g = std::shared_ptr<JsonGrammar>(new JsonGrammar());
  g->root_ = g->any_object_;
  (void)g->derive();  // the built-in nodes always derive
  return g;
}

Status JsonGrammar::derive() {
  // What the syntax spells differently: a string's marks, and a key's (`"key":` or `key:`).
  const bool gemma = syntax_ == ValueSyntax::gemma4;
  const std::string_view string_start = gemma ? "<" : "\"";
  const size_t string_marks = gemma ? 2 * kGemma4Quote.size() : 2, key_marks = gemma ? 1 : 3;
  // First bytes and shortest lengths are least fixed points over the node graph ($ref
  // cycles): iterate until nothing changes (each pass only grows a set or shrinks a length).
  for (auto& n : nodes_) {
    n.min_bytes = kInfinite;
    n.first_bytes = {};
    switch (n.kind) {
      case SchemaKind::object: n.first_bytes = bytes_of("{"); break;
      case SchemaKind::array: n.first_bytes = bytes_of("["); break;
      case SchemaKind::string: n.first_bytes = bytes_of(string_start); break;
      case SchemaKind::number:
      case SchemaKind::integer: n.first_bytes = bytes_of("-0123456789"); break;
      case SchemaKind::literals:
        for (const auto& l : n.literals) set_byte(n.first_bytes, uint8_t(l[0]));
        break;
      case SchemaKind::any: n.first_bytes = bytes_of(std::string("{[-0123456789tfn") + std::string(string_start)); break;
      case SchemaKind::wrapped:
        for (const auto& l : n.literals) set_byte(n.first_bytes, uint8_t(l[0]));
        break;
      case SchemaKind::any_of: break;
    }
  }
  for (bool changed = true; changed;) {
    changed = false;
    for (auto& n : nodes_) {
      size_t m = kInfinite;
      switch (n.kind) {
        case SchemaKind::object: {
          const size_t P = n.properties.size();
          n.required_tail.assign(P + 1, 0);
          n.shortest_entry_from.assign(P + 1, kInfinite);
          for (size_t i = P; i-- > 0;) {
            const auto& p = n.properties[i];
            const size_t entry = add(p.key.size() + key_marks, nodes_[p.value].min_bytes);  // "key":value or key:value
            n.required_tail[i] = add(n.required_tail[i + 1], p.required ? entry + 1 : 0);
            n.shortest_entry_from[i] = std::min(n.shortest_entry_from[i + 1], entry);
          }
          m = n.open || n.required_tail[0] == 0 ? 2 : add(n.required_tail[0], 1);  // "{" + entries - first comma + "}"
          break;
        }
        case SchemaKind::array:
          m = n.min_items == 0 ? 2 : add(1, std::min(kInfinite, n.min_items * (nodes_[n.items].min_bytes + 1)));
          break;
        case SchemaKind::string: m = string_marks + std::min(n.min_length, kInfinite); break;
        case SchemaKind::number:
        case SchemaKind::integer:
        case SchemaKind::any: m = 1; break;
        case SchemaKind::literals:
          for (const auto& l : n.literals) m = std::min(m, l.size());
          break;
        case SchemaKind::wrapped:
          for (size_t i = 0; i < n.literals.size(); ++i)
            m = std::min(m, add(n.literals[i].size() + n.suffix.size(), nodes_[n.alternatives[i]].min_bytes));
          break;
        case SchemaKind::any_of:
          for (uint32_t a : n.alternatives) {
            m = std::min(m, nodes_[a].min_bytes);
            for (size_t w = 0; w < 4; ++w) {
              const uint64_t grown = n.first_bytes[w] | nodes_[a].first_bytes[w];
              if (grown != n.first_bytes[w]) changed = true;
              n.first_bytes[w] = grown;
            }
          }
          break;
      }
      if (m < n.min_bytes) {
        n.min_bytes = m;
        changed = true;
      }
    }
  }
  if (nodes_[root_].min_bytes >= kInfinite)
    return make_error(ErrorCode::bad_request, "json_schema: no finite value satisfies the schema (a $ref cycle through required properties)");
  // The matcher picks an alternative by the value's first byte: alternatives must differ there.
  for (const auto& n : nodes_) {
    if (n.kind != SchemaKind::any_of) continue;
    std::array<uint64_t, 4> seen{};
    for (uint32_t a : n.alternatives)
      for (size_t w = 0; w < 4; ++w) {
        if (seen[w] & nodes_[a].first_bytes[w])
          return make_error(ErrorCode::bad_request,
                            "json_schema: anyOf/oneOf/type alternatives must begin with different characters (e.g. string, "
                            "number, null, one object); two that both can begin alike are not supported");
        seen[w] |= nodes_[a].first_bytes[w];
      }
  }
  return Ok{};
}

}  // namespace larql
