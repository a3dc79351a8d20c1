#include "net/shard_stats.h"

#include <nlohmann/json.hpp>

namespace larql {
namespace {

using nlohmann::json;

Error not_stats(const std::string& what) {
  return make_error(ErrorCode::shard_unavailable, "/v1/stats is not the JSON of a larql shard: " + what);
}

// An unsigned number at `key`, if there is one; an error if there is something else.
Result<std::optional<size_t>> unsigned_field(const json& j, const char* key) {
  if (!j.contains(key) || j[key].is_null()) return std::optional<size_t>();
  if (!j[key].is_number_unsigned()) return not_stats(std::string(key) + " is " + j[key].dump(-1).substr(0, 40) + ", not a count");
  return std::optional<size_t>(j[key].get<size_t>());
}

Result<std::string> string_field(const json& j, const char* key, std::string fallback) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  if (!j[key].is_string()) return not_stats(std::string(key) + " is not a string");
  return j[key].get<std::string>();
}

}  // namespace

Result<ShardStats> parse_shard_stats(std::string_view body) {
  const json j = json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return not_stats("not a JSON object");
  ShardStats s;
  auto hidden = unsigned_field(j, "hidden_size");
  if (!hidden) return hidden.error();
  if (!*hidden || **hidden == 0) return not_stats("no hidden_size");
  s.hidden = **hidden;
  auto layers = unsigned_field(j, "num_layers");
  if (!layers) return layers.error();
  s.num_layers = layers->value_or(0);
  for (auto [key, field] : {std::pair{"model", &s.model}, std::pair{"family", &s.family}, std::pair{"mode", &s.mode}}) {
    auto text = string_field(j, key, "");
    if (!text) return text.error();
    *field = *text;
  }
  auto arithmetic = string_field(j, "ffn_arithmetic", "f32");
  if (!arithmetic) return arithmetic.error();
  s.ffn_arithmetic = *arithmetic;

  if (j.contains("layers") && !j["layers"].is_null()) {
    const json& l = j["layers"];
    if (!l.is_object()) return not_stats("layers is not an object with start and end");
    auto start = unsigned_field(l, "start"), end = unsigned_field(l, "end");
    if (!start) return start.error();
    if (!end) return end.error();
    if (!*start || !*end || **start > **end || **end > UINT32_MAX) return not_stats("layers is not a range start ≤ end");
    s.layers = LayerRange{uint32_t(**start), uint32_t(**end)};
  }
  for (auto [key, out] : {std::pair{"layer_fingerprints", &s.fingerprints}, std::pair{"expert_fingerprints", &s.expert_fingerprints}})
    if (j.contains(key) && !j[key].is_null()) {
      const json& fp = j[key];
      if (!fp.is_object()) return not_stats(std::string(key) + " is not an object");
      out->emplace();
      for (const auto& [name, value] : fp.items()) {
        const auto layer = parse_layer_range(name);
        if (!layer || layer->first != layer->last || !value.is_string())
          return not_stats(std::string(key) + " has \"" + name.substr(0, 20) + "\": not a layer number and a string");
        (**out)[layer->first] = value.get<std::string>();
      }
    }
  if (j.contains("experts") && !j["experts"].is_null()) {
    const json& e = j["experts"];
    if (!e.is_object()) return not_stats("experts is not an object with count, used, start and end");
    ShardStats::Experts experts;
    for (auto [name, field] : {std::pair{"count", &experts.count}, std::pair{"shared", &experts.shared}, std::pair{"used", &experts.used}}) {
      auto v = unsigned_field(e, name);
      if (!v) return v.error();
      *field = v->value_or(0);
    }
    auto start = unsigned_field(e, "start"), end = unsigned_field(e, "end");
    if (!start) return start.error();
    if (!end) return end.error();
    if (!*start || !*end || **start > **end || **end >= experts.count + experts.shared)
      return not_stats("experts.start-end is not a range of its count + shared experts");
    experts.owned = {uint32_t(**start), uint32_t(**end)};
    s.experts = experts;
  }
  auto routing = string_field(j, "routing", "");
  if (!routing) return routing.error();
  s.routing = *routing;
  for (auto [key, out] : {std::pair{"request", &s.request_encodings}, std::pair{"response", &s.response_encodings}})
    if (j.contains("wire") && j["wire"].is_object() && j["wire"].contains(key)) {
      const json& names = j["wire"][key];
      if (!names.is_array()) return not_stats(std::string("wire.") + key + " is not a list");
      out->emplace();
      for (const auto& name : names)
        if (name.is_string()) (*out)->push_back(name.get<std::string>());  // unknown names are skipped
    }
  if (j.contains("sessions") && !j["sessions"].is_null()) {
    const json& o = j["sessions"];
    if (!o.is_object()) return not_stats("sessions is not an object");
    ShardStats::Sessions ss;
    for (auto [name, field] : {std::pair{"open", &ss.open}, std::pair{"max", &ss.max}, std::pair{"max_positions", &ss.max_positions},
                               std::pair{"max_rows", &ss.max_rows}, std::pair{"rewind_positions", &ss.rewind_positions}}) {
      auto v = unsigned_field(o, name);
      if (!v) return v.error();
      if (!*v) return not_stats(std::string("sessions.") + name + " is missing");
      *field = **v;
    }
    if (ss.max_rows == 0 || ss.max_positions == 0) return not_stats("sessions.max_rows and max_positions must be at least 1");
    if (o.contains("idle_timeout_s") && o["idle_timeout_s"].is_number()) ss.idle_timeout_s = o["idle_timeout_s"].get<double>();
    if (!o.contains("wire") || !o["wire"].is_array()) return not_stats("sessions.wire is not a list");
    for (const auto& name : o["wire"])
      if (name.is_string()) ss.wire.push_back(name.get<std::string>());
    auto arithmetic = string_field(o, "layers_arithmetic", "");
    if (!arithmetic) return arithmetic.error();
    if (arithmetic->empty()) return not_stats("sessions.layers_arithmetic is missing");
    ss.layers_arithmetic = *arithmetic;
    if (!j.contains("session_fingerprints") || !j["session_fingerprints"].is_object())
      return not_stats("session_fingerprints is not an object");
    for (const auto& [name, value] : j["session_fingerprints"].items()) {
      const auto layer = parse_layer_range(name);
      if (!layer || layer->first != layer->last || !value.is_string())
        return not_stats("session_fingerprints has \"" + name.substr(0, 20) + "\": not a layer number and a string");
      ss.fingerprints[layer->first] = value.get<std::string>();
    }
    for (auto [key, field] : {std::pair{"session_config_fingerprint", &ss.config_fingerprint},
                              std::pair{"session_globals_fingerprint", &ss.globals_fingerprint}}) {
      auto text = string_field(j, key, "");
      if (!text) return text.error();
      if (text->empty()) return not_stats(std::string(key) + " is missing");
      *field = *text;
    }
    if (j.contains("session_ranges")) {
      if (!j["session_ranges"].is_array()) return not_stats("session_ranges is not a list");
      for (const auto& r : j["session_ranges"]) {
        const auto layers = r.is_object() && r.contains("layers") && r["layers"].is_string()
                                ? parse_layer_range(r["layers"].get<std::string>())
                                : Result<LayerRange>(make_error(ErrorCode::invalid_argument, "no layers"));
        if (!layers || !r.contains("config_fingerprint") || !r["config_fingerprint"].is_string() ||
            !r.contains("layers_arithmetic") || !r["layers_arithmetic"].is_string())
          return not_stats("session_ranges has an entry that is not {layers, config_fingerprint, layers_arithmetic}");
        ss.ranges.push_back({*layers, r["config_fingerprint"].get<std::string>(), r["layers_arithmetic"].get<std::string>()});
      }
    }
    s.sessions = std::move(ss);
  }
  auto max_body = unsigned_field(j, "max_body_bytes");
  if (!max_body) return max_body.error();
  s.max_body_bytes = *max_body;
  auto max_work = unsigned_field(j, "max_work");
  if (!max_work) return max_work.error();
  if (*max_work && **max_work > 0) s.max_work = *max_work;
  return s;
}

}  // namespace larql
