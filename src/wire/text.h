// Small ASCII helpers for header parsing (HTTP tokens are ASCII, case-insensitive).
#pragma once

#include <string_view>

namespace larql::wire {

inline bool is_http_space(char c) { return c == ' ' || c == '\t'; }

inline std::string_view trim(std::string_view s) {
  while (!s.empty() && is_http_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_http_space(s.back())) s.remove_suffix(1);
  return s;
}

inline char ascii_lower(char c) { return (c >= 'A' && c <= 'Z') ? char(c - 'A' + 'a') : c; }

inline bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (ascii_lower(a[i]) != ascii_lower(b[i])) return false;
  return true;
}

}  // namespace larql::wire
