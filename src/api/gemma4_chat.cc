#include "api/gemma4_chat.h"

#include <algorithm>
#include <cctype>

#include "api/jinja_values.h"
#include "constrain/gemma4_syntax.h"

namespace larql {
namespace {

using json = nlohmann::ordered_json;

using jinja::member;
using jinja::trim;
using jinja::truthy;

std::string in_marks(const std::string& s) { return std::string(kGemma4Quote) + s + std::string(kGemma4Quote); }

std::string upper(std::string s) {
  for (char& c : s) c = char(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// `value | upper` of a schema's type: a string, or a list printed as Python prints it
// (['STRING', 'NULL']); undefined prints nothing.
Result<std::string> type_text(const json& type) {
  if (type.is_null()) return std::string();
  if (type.is_string()) return upper(type.get<std::string>());
  if (type.is_array() && std::all_of(type.begin(), type.end(), [](const json& t) { return t.is_string(); })) {
    std::string out = "[";
    for (size_t i = 0; i < type.size(); ++i) out += (i ? ", '" : "'") + type[i].get<std::string>() + "'";
    return upper(out + "]");
  }
  return make_error(ErrorCode::bad_request, "a type that is neither a string nor a list of strings");
}

std::string required_list(const json& names) {
  std::string out = "required:[";
  for (size_t i = 0; i < names.size(); ++i) out += (i ? "," : "") + in_marks(names[i].is_string() ? names[i].get<std::string>() : names[i].dump());
  return out + "]";
}

// The template's format_parameters: each property but the schema's own keywords, sorted.
Result<std::string> format_parameters(const json& properties, size_t depth) {
  static const char* kStandard[] = {"description", "type", "properties", "required", "nullable"};
  if (depth > 32) return make_error(ErrorCode::bad_request, "parameters nested deeper than 32 levels");
  std::string out;
  bool found_first = false;
  for (const auto& [key, value_ptr] : dictsorted(properties)) {
    if (std::find(std::begin(kStandard), std::end(kStandard), key) != std::end(kStandard)) continue;
    const json& value = *value_ptr;
    if (found_first) out += ",";
    found_first = true;
    out += key + ":{";
    bool add_comma = false;
    auto comma = [&] {
      if (add_comma) out += ",";
      add_comma = true;
    };
    if (truthy(member(value, "description"))) {
      const json& d = member(value, "description");
      out += "description:" + in_marks(d.is_string() ? d.get<std::string>() : d.dump());
      add_comma = true;
    }
    auto type = type_text(member(value, "type"));
    if (!type) return make_error(ErrorCode::bad_request, "property '" + key + "' has " + type.error().message);
    if (*type == "STRING") {
      if (truthy(member(value, "enum"))) {
        comma();
        out += "enum:" + gemma4_text(member(value, "enum"), true);
      }
    } else if (*type == "ARRAY") {
      const json& items = member(value, "items");
      if (items.is_object() && !items.empty()) {
        comma();
        out += "items:{";
        bool first_item = true;
        for (const auto& [item_key, item_ptr] : dictsorted(items)) {
          const json& item = *item_ptr;
          if (item.is_null()) continue;
          if (!first_item) out += ",";
          first_item = false;
          if (item_key == "properties") {
            out += "properties:{";
            if (item.is_object()) {
              auto inner = format_parameters(item, depth + 1);
              if (!inner) return inner.error();
              out += *inner;
            }
            out += "}";
          } else if (item_key == "required") {
            out += required_list(item);
          } else if (item_key == "type") {
            if (item.is_string()) {
              out += "type:" + in_marks(upper(item.get<std::string>()));
            } else {
              json uppered = json::array();
              for (const auto& t : item) uppered.push_back(t.is_string() ? json(upper(t.get<std::string>())) : t);
              out += "type:" + gemma4_text(uppered, true);
            }
          } else {
            out += item_key + ":" + gemma4_text(item, true);
          }
        }
        out += "}";
      }
    }
    if (truthy(member(value, "nullable"))) {
      comma();
      out += "nullable:true";
    }
    if (*type == "OBJECT") {
      // (Without properties the template lists the schema's own other keys as properties.)
      const json& props = member(value, "properties");
      comma();
      auto inner = format_parameters(props.is_object() ? props : value, depth + 1);
      if (!inner) return inner.error();
      out += "properties:{" + *inner + "}";
      if (truthy(member(value, "required"))) {
        comma();
        out += required_list(member(value, "required"));
      }
    }
    comma();
    out += "type:" + in_marks(*type) + "}";
  }
  return out;
}

// A call's arguments as the template writes a mapping: sorted key:value pairs.
std::string call_text(const ChatToolCall& call) {
  const json arguments = json::parse(call.arguments, nullptr, false);
  std::string out = "<|tool_call>call:" + call.name + "{";
  if (arguments.is_object()) {
    bool first = true;
    for (const auto& [key, value] : dictsorted(arguments)) {
      out += (first ? "" : ",") + key + ":" + gemma4_text(*value, false);
      first = false;
    }
  }
  return out + "}<tool_call|>";
}

}  // namespace

Result<std::string> gemma4_declaration(const json& tool) {
  const json& f = member(tool, "function");
  const json& description = member(f, "description");
  std::string out = "declaration:" + member(f, "name").get<std::string>() + "{description:" +
                    in_marks(description.is_string() ? description.get<std::string>() : "");
  const json& params = member(f, "parameters");
  if (truthy(params)) {
    out += ",parameters:{";
    if (truthy(member(params, "properties"))) {
      auto properties = format_parameters(member(params, "properties"), 0);
      if (!properties)
        return make_error(ErrorCode::bad_request,
                          "tool '" + member(f, "name").get<std::string>() + "': Gemma 4's template cannot write its parameters: " +
                              properties.error().message);
      out += "properties:{" + *properties + "},";
    }
    if (truthy(member(params, "required"))) out += required_list(member(params, "required")) + ",";
    if (truthy(member(params, "type"))) {
      auto type = type_text(member(params, "type"));
      if (!type) return make_error(ErrorCode::bad_request, "tool '" + member(f, "name").get<std::string>() + "': parameters have " + type.error().message);
      out += "type:" + in_marks(*type) + "}";
    }
  }
  return trim(out + "}");
}

Result<std::string> render_gemma4(const std::vector<ChatMessage>& messages, const std::vector<json>& tools) {
  enum class Last { none, tool, tool_call, tool_response };
  Last last = Last::none;
  std::string out;
  size_t start = 0;
  const bool system = !messages.empty() && messages[0].role == "system";
  if (!tools.empty() || system) {
    out += "<|turn>system\n";
    if (system) out += trim(messages[0].content), start = 1;
    for (const auto& tool : tools) {
      auto declaration = gemma4_declaration(tool);
      if (!declaration) return declaration.error();
      out += "<|tool>" + *declaration + "<tool|>";
    }
    if (!tools.empty()) last = Last::tool;
    out += "<turn|>\n";
  }
  for (size_t i = start; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "tool") continue;  // written with the assistant turn whose calls it answers
    last = Last::none;
    const bool model = m.role == "assistant";
    // An assistant message right after another (tool results between) goes on in its turn.
    size_t previous = i;
    while (previous > start && messages[previous - 1].role == "tool") --previous;
    const bool continues = model && previous > start && messages[previous - 1].role == "assistant";
    if (!continues) out += "<|turn>" + std::string(model ? "model" : m.role) + "\n";
    for (const auto& call : m.tool_calls) out += call_text(call);
    if (!m.tool_calls.empty()) last = Last::tool_call;
    bool responded = false;
    if (!m.tool_calls.empty())
      for (size_t k = i + 1, place = 0; k < messages.size() && messages[k].role == "tool"; ++k, ++place) {
        const ChatMessage& result = messages[k];
        std::string name = place < m.tool_calls.size() ? m.tool_calls[place].name : "unknown";
        for (const auto& call : m.tool_calls)
          if (!result.tool_call_id.empty() && call.id == result.tool_call_id) name = call.name;
        out += "<|tool_response>response:" + name + "{value:" + in_marks(result.content) + "}<tool_response|>";
        responded = true;
        last = Last::tool_response;
      }
    const std::string content = trim(m.content);
    out += content;
    if (last == Last::tool_call && !responded) out += "<|tool_response>";
    else if (!(responded && m.content.empty())) out += "<turn|>\n";
  }
  if (last != Last::tool_response && last != Last::tool_call) out += "<|turn>model\n<|channel>thought\n<channel|>";
  return out;
}

}  // namespace larql
