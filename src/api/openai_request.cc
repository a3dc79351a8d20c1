#include "api/openai_request.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <string>
#include <nlohmann/json.hpp>

namespace larql {
namespace {

using nlohmann::json;

OpenAiError bad(const std::string& param, const std::string& message) { return {400, message, "invalid_request_error", param, ""}; }

// A message's content: a string, or OpenAI's array of {"type":"text","text":…} parts.
std::optional<std::string> content_text(const json& content) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) return std::nullopt;
  std::string out;
  for (const auto& part : content) {
    if (!part.is_object() || !part.contains("type") || part["type"] != "text" || !part.contains("text") ||
        !part["text"].is_string())
      return std::nullopt;
    out += part["text"].get<std::string>();
  }
  return out;
}

// response_format: text, any JSON object, or a JSON schema's values (compiled here, so
// a schema larql cannot follow is a 400 naming the keyword before any work is queued).
std::optional<OpenAiError> response_format(const std::string& body, const json& f, CompletionRequest& r) {
  auto refused = [](const std::string& message) { return bad("response_format", message); };
  if (!f.is_object() || !f.contains("type") || !f["type"].is_string())
    return refused("response_format must be an object with a type: text, json_object or json_schema");
  const std::string type = f["type"].get<std::string>();
  if (type == "text") return std::nullopt;
  if (type == "json_object") {
    r.grammar = JsonGrammar::any_object();
    return std::nullopt;
  }
  if (type != "json_schema") return refused("response_format type '" + type + "' is not one of text, json_object, json_schema");
  if (!f.contains("json_schema") || !f["json_schema"].is_object())
    return refused("response_format json_schema needs a json_schema object ({\"name\": ..., \"schema\": {...}})");
  // The schema again, with its properties in the order written (they are generated in it).
  // A body with a key twice can read differently here (the first one kept, not the last).
  const auto ordered = nlohmann::ordered_json::parse(body, nullptr, false);
  const nlohmann::ordered_json* spec = nullptr;
  if (ordered.is_object() && ordered.contains("response_format") && ordered["response_format"].is_object() &&
      ordered["response_format"].contains("json_schema") && ordered["response_format"]["json_schema"].is_object())
    spec = &ordered["response_format"]["json_schema"];
  if (!spec) return refused("response_format is given twice, differently");
  auto grammar = JsonGrammar::from_schema(spec->contains("schema") ? (*spec)["schema"] : nlohmann::ordered_json(true));
  if (!grammar) return refused(grammar.error().message);
  r.grammar = *grammar;
  return std::nullopt;
}

// An assistant message's tool_calls: [{"type": "function", "function": {"name", "arguments"}}],
// arguments a JSON object's text.
std::optional<OpenAiError> tool_calls_of(const json& calls, const std::string& where, ChatMessage& message) {
  if (!calls.is_array()) return bad(where, where + " must be an array");
  for (size_t k = 0; k < calls.size(); ++k) {
    const json& c = calls[k];
    const std::string at = where + "[" + std::to_string(k) + "]";
    if (!c.is_object() || !c.contains("function") || !c["function"].is_object() || !c["function"].contains("name") ||
        !c["function"]["name"].is_string() || !c["function"].contains("arguments") || !c["function"]["arguments"].is_string())
      return bad(at, at + " must be {\"type\": \"function\", \"function\": {\"name\": string, \"arguments\": string}}");
    const std::string arguments = c["function"]["arguments"].get<std::string>();
    if (!json::parse(arguments, nullptr, false).is_object())
      return bad(at + ".function.arguments", at + ".function.arguments must be a JSON object's text");
    const std::string id = c.contains("id") && c["id"].is_string() ? c["id"].get<std::string>() : "";
    message.tool_calls.push_back({c["function"]["name"].get<std::string>(), arguments, id});
  }
  return std::nullopt;
}

bool valid_function_name(const std::string& name) {
  return !name.empty() && name.size() <= 64 &&
         std::all_of(name.begin(), name.end(), [](char ch) { return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '-'; });
}

// tools and tool_choice. The definitions are kept as sent, their keys in order (the body
// again as ordered JSON: chat templates print them).
std::optional<OpenAiError> tools(const std::string& body, const json& j, CompletionRequest& r) {
  const bool has_tools = j.contains("tools") && !j["tools"].is_null() && !(j["tools"].is_array() && j["tools"].empty());
  const bool has_choice = j.contains("tool_choice") && !j["tool_choice"].is_null();
  if (!has_tools) {
    if (has_choice && j["tool_choice"] != "none") return bad("tool_choice", "tool_choice needs tools");
    return std::nullopt;
  }
  if (!r.chat) return bad("tools", "tools are for chat completions");
  const json& list = j["tools"];
  constexpr size_t kMaxTools = 64;
  if (!list.is_array() || list.size() > kMaxTools) return bad("tools", "tools must be an array of at most 64 function definitions");
  std::vector<std::string> names;
  for (size_t i = 0; i < list.size(); ++i) {
    const json& t = list[i];
    const std::string where = "tools[" + std::to_string(i) + "]";
    if (!t.is_object() || t.value("type", std::string()) != "function" || !t.contains("function") || !t["function"].is_object())
      return bad(where, where + " must be {\"type\": \"function\", \"function\": {...}}");
    const json& f = t["function"];
    if (!f.contains("name") || !f["name"].is_string() || !valid_function_name(f["name"].get<std::string>()))
      return bad(where + ".function.name", where + ".function.name must be 1 to 64 letters, digits, _ or -");
    if (f.contains("parameters") && !f["parameters"].is_null() && !f["parameters"].is_object())
      return bad(where + ".function.parameters", where + ".function.parameters must be a JSON schema object");
    if (std::find(names.begin(), names.end(), f["name"].get<std::string>()) != names.end())
      return bad(where + ".function.name", "two tools are named '" + f["name"].get<std::string>() + "'");
    names.push_back(f["name"].get<std::string>());
  }
  const auto ordered = nlohmann::ordered_json::parse(body, nullptr, false);
  // (A body with "tools" twice reads the first here and the last above: they must agree.)
  if (!ordered.is_object() || !ordered.contains("tools") || json::parse(ordered["tools"].dump()) != list)
    return bad("tools", "tools is given twice, differently");
  r.tools.assign(ordered["tools"].begin(), ordered["tools"].end());
  r.tool_choice = CompletionRequest::ToolChoice::automatic;
  if (!has_choice) return std::nullopt;
  const json& c = j["tool_choice"];
  if (c == "none") r.tool_choice = CompletionRequest::ToolChoice::none;
  else if (c == "auto") r.tool_choice = CompletionRequest::ToolChoice::automatic;
  else if (c == "required") r.tool_choice = CompletionRequest::ToolChoice::required;
  else if (c.is_object() && c.value("type", std::string()) == "function" && c.contains("function") && c["function"].is_object() &&
           c["function"].contains("name") && c["function"]["name"].is_string()) {
    r.tool_name = c["function"]["name"].get<std::string>();
    if (std::find(names.begin(), names.end(), r.tool_name) == names.end())
      return bad("tool_choice", "tool_choice names '" + r.tool_name + "', which is not among the tools");
    r.tool_choice = CompletionRequest::ToolChoice::named;
  } else {
    return bad("tool_choice", "tool_choice must be none, auto, required or {\"type\": \"function\", \"function\": {\"name\": ...}}");
  }
  return std::nullopt;
}

}  // namespace

std::variant<CompletionRequest, OpenAiError> parse_completion_request(const std::string& body, bool chat) {
  const json j = json::parse(body, nullptr, false);
  if (j.is_discarded()) return OpenAiError{400, "the body is not valid JSON", "invalid_request_error", "", "invalid_json"};
  if (!j.is_object()) return bad("", "the body must be a JSON object");
  CompletionRequest r;
  r.chat = chat;

  if (chat) {
    if (!j.contains("messages") || !j["messages"].is_array() || j["messages"].empty())
      return bad("messages", "messages must be a non-empty array");
    for (size_t i = 0; i < j["messages"].size(); ++i) {
      const json& m = j["messages"][i];
      const std::string where = "messages[" + std::to_string(i) + "]";
      if (!m.is_object() || !m.contains("role") || !m["role"].is_string())
        return bad(where + ".role", where + " must be an object with a string role");
      const bool calls = m.contains("tool_calls") && !m["tool_calls"].is_null();
      // An assistant message that calls tools may have no content.
      auto text = m.contains("content") && !(calls && m["content"].is_null()) ? content_text(m["content"])
                                                                               : calls ? std::optional<std::string>("") : std::nullopt;
      if (!text) return bad(where + ".content", where + ".content must be a string or an array of text parts");
      ChatMessage message{m["role"].get<std::string>(), *text};
      if (calls) {
        if (auto e = tool_calls_of(m["tool_calls"], where + ".tool_calls", message)) return *e;
      }
      if (m.contains("tool_call_id") && m["tool_call_id"].is_string()) message.tool_call_id = m["tool_call_id"].get<std::string>();
      r.messages.push_back(std::move(message));
    }
  } else {
    if (!j.contains("prompt")) return bad("prompt", "prompt is required");
    const json& p = j["prompt"];
    if (p.is_string()) {
      r.prompt = p.get<std::string>();
    } else if (p.is_array() && !p.empty() && std::all_of(p.begin(), p.end(), [](const json& x) { return x.is_number_integer(); })) {
      // An id beyond int's range would wrap into some other token.
      for (const json& id : p)
        if (id.is_number_unsigned() ? id.get<uint64_t>() > uint64_t(INT32_MAX) : id.get<int64_t>() < INT32_MIN)
          return bad("prompt", "token id " + id.dump() + " is outside any vocabulary");
      r.prompt = p.get<std::vector<int>>();
    } else if (p.is_array() && !p.empty() && p.size() == 1 && p[0].is_string()) {
      r.prompt = p[0].get<std::string>();
    } else {
      return bad("prompt", "prompt must be a string or a non-empty array of token ids (one prompt per request)");
    }
  }

  auto number = [&](const char* key, double lo, double hi, auto& out) -> std::optional<OpenAiError> {
    if (!j.contains(key) || j[key].is_null()) return std::nullopt;
    if (!j[key].is_number() || j[key].get<double>() < lo || j[key].get<double>() > hi)
      return bad(key, std::string(key) + " must be a number from " + json(lo).dump() + " to " + json(hi).dump());
    out = j[key].get<std::decay_t<decltype(out)>>();
    return std::nullopt;
  };
  if (j.contains("echo") && !j["echo"].is_null()) {
    if (chat) return bad("echo", "echo is for completions");
    if (!j["echo"].is_boolean()) return bad("echo", "echo must be true or false");
    r.echo = j["echo"].get<bool>();
  }
  for (const char* key : {"max_tokens", "max_completion_tokens"})
    if (j.contains(key) && !j[key].is_null()) {
      if (!j[key].is_number_unsigned() || (j[key].get<size_t>() == 0 && !r.echo))
        return bad(key, std::string(key) + " must be a positive integer (0 only with echo)");
      r.max_tokens = j[key].get<size_t>();
    }
  if (auto e = number("temperature", 0, 2, r.temperature)) return *e;
  if (auto e = number("top_p", 0, 1, r.top_p)) return *e;
  if (r.top_p == 0) return bad("top_p", "top_p must be above 0");
  if (j.contains("top_k") && !j["top_k"].is_null()) {
    if (!j["top_k"].is_number_integer() || j["top_k"].get<int64_t>() < -1)
      return bad("top_k", "top_k must be a whole number (0 or -1: every token)");
    r.top_k = size_t(std::max<int64_t>(0, j["top_k"].get<int64_t>()));
  }
  if (auto e = number("min_p", 0, 1, r.min_p)) return *e;
  if (auto e = number("repetition_penalty", 0, 10, r.repetition_penalty)) return *e;
  if (r.repetition_penalty == 0) return bad("repetition_penalty", "repetition_penalty must be above 0");
  if (auto e = number("presence_penalty", -2, 2, r.presence_penalty)) return *e;
  if (auto e = number("frequency_penalty", -2, 2, r.frequency_penalty)) return *e;
  if (j.contains("logit_bias") && !j["logit_bias"].is_null()) {
    const json& b = j["logit_bias"];
    if (!b.is_object()) return bad("logit_bias", "logit_bias must be an object of token ids to numbers");
    constexpr size_t kMaxBiases = 1024;
    if (b.size() > kMaxBiases) return bad("logit_bias", "logit_bias has more than " + std::to_string(kMaxBiases) + " entries");
    for (const auto& [key, value] : b.items()) {
      size_t used = 0;
      long long id = -1;
      try {
        id = std::stoll(key, &used);
      } catch (...) {
      }
      if (used != key.size() || id < 0 || id > INT32_MAX)
        return bad("logit_bias", "logit_bias key '" + key + "' is not a token id");
      if (!value.is_number() || value.get<double>() < -100 || value.get<double>() > 100)
        return bad("logit_bias", "logit_bias values must be numbers from -100 to 100");
      r.logit_bias[int(id)] = value.get<float>();
    }
  }
  if (j.contains("seed") && !j["seed"].is_null()) {
    if (!j["seed"].is_number_integer()) return bad("seed", "seed must be an integer");
    r.seed = uint64_t(j["seed"].get<int64_t>());
  }
  constexpr size_t kMaxChoices = 16;
  if (j.contains("n") && !j["n"].is_null()) {
    if (!j["n"].is_number_unsigned() || j["n"].get<size_t>() == 0 || j["n"].get<size_t>() > kMaxChoices)
      return bad("n", "n must be an integer from 1 to " + std::to_string(kMaxChoices));
    r.n = j["n"].get<size_t>();
  }
  if (j.contains("best_of") && !j["best_of"].is_null() && j["best_of"] != 1) return bad("best_of", "best_of must be 1");
  // Log-probabilities: completions' logprobs is how many alternatives (0: the chosen token's
  // only); chat's is a switch, with top_logprobs alternatives.
  constexpr size_t kMaxTopLogprobs = 20;
  auto alternatives = [&](const char* key) -> std::optional<OpenAiError> {
    if (!j[key].is_number_unsigned() || j[key].get<size_t>() > kMaxTopLogprobs)
      return bad(key, std::string(key) + " must be an integer from 0 to " + std::to_string(kMaxTopLogprobs));
    r.top_logprobs = j[key].get<size_t>();
    return std::nullopt;
  };
  const bool has_logprobs = j.contains("logprobs") && !j["logprobs"].is_null();
  const bool has_top = j.contains("top_logprobs") && !j["top_logprobs"].is_null();
  if (!chat && has_logprobs)
    if (auto e = alternatives("logprobs")) return *e;
  if (!chat && has_top) return bad("top_logprobs", "top_logprobs is chat's; completions take logprobs N");
  if (chat && has_logprobs) {
    if (!j["logprobs"].is_boolean()) return bad("logprobs", "logprobs must be true or false");
    if (j["logprobs"].get<bool>()) r.top_logprobs = 0;
  }
  if (chat && has_top) {
    if (!r.top_logprobs) return bad("top_logprobs", "top_logprobs needs logprobs: true");
    if (auto e = alternatives("top_logprobs")) return *e;
  }
  if (j.contains("response_format") && !j["response_format"].is_null()) {
    if (auto e = response_format(body, j["response_format"], r)) return *e;
  }
  if (auto e = tools(body, j, r)) return *e;
  for (const char* key : {"functions", "suffix"})
    if (j.contains(key) && !j[key].is_null() && j[key] != false && !(j[key].is_array() && j[key].empty()) &&
        !(j[key].is_object() && j[key].empty()))
      return bad(key, std::string(key) + " is not supported by larql");
  if (j.contains("stop") && !j["stop"].is_null()) {
    const json& s = j["stop"];
    if (s.is_string()) r.stop.push_back(s.get<std::string>());
    else if (s.is_array() && s.size() <= 4 && std::all_of(s.begin(), s.end(), [](const json& x) { return x.is_string(); }))
      r.stop = s.get<std::vector<std::string>>();
    else return bad("stop", "stop must be a string or an array of at most 4 strings");
  }
  if (j.contains("stream") && !j["stream"].is_null()) {
    if (!j["stream"].is_boolean()) return bad("stream", "stream must be true or false");
    r.stream = j["stream"].get<bool>();
  }
  if (j.contains("stream_options") && !j["stream_options"].is_null()) {
    const json& o = j["stream_options"];
    if (!o.is_object()) return bad("stream_options", "stream_options must be an object");
    if (o.contains("include_usage") && !o["include_usage"].is_null()) {
      if (!o["include_usage"].is_boolean())
        return bad("stream_options.include_usage", "stream_options.include_usage must be true or false");
      r.include_usage = o["include_usage"].get<bool>();
    }
  }
  return r;
}

}  // namespace larql
