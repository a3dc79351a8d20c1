// What chat templates do with values, for the renderers that reproduce them by hand: Jinja's
// `| trim`, its truthiness of a JSON value in an `if`, and a member that may be missing
// (undefined, which tests false).
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace larql::jinja {

inline std::string trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t\n\r");
  if (first == std::string_view::npos) return {};
  const auto last = s.find_last_not_of(" \t\n\r");
  return std::string(s.substr(first, last - first + 1));
}

inline bool truthy(const nlohmann::ordered_json& v) {
  if (v.is_null()) return false;
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_string() || v.is_array() || v.is_object()) return !v.empty();
  if (v.is_number()) return v.get<double>() != 0;
  return true;
}

// v[key], or null when v is no object or has no such member.
inline const nlohmann::ordered_json& member(const nlohmann::ordered_json& v, const char* key) {
  static const nlohmann::ordered_json missing;
  return v.is_object() && v.contains(key) ? v[key] : missing;
}

}  // namespace larql::jinja
