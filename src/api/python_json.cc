#include "api/python_json.h"

namespace larql {
namespace {

void write(const nlohmann::ordered_json& v, int indent, int depth, std::string& out) {
  auto newline = [&](int level) {
    out += '\n';
    out.append(size_t(indent * level), ' ');
  };
  const bool open_lines = indent >= 0;
  if (v.is_object() && !v.empty()) {
    out += '{';
    bool first = true;
    for (const auto& [key, item] : v.items()) {
      if (!first) out += open_lines ? "," : ", ";
      first = false;
      if (open_lines) newline(depth + 1);
      out += nlohmann::ordered_json(key).dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
      out += ": ";
      write(item, indent, depth + 1, out);
    }
    if (open_lines) newline(depth);
    out += '}';
  } else if (v.is_array() && !v.empty()) {
    out += '[';
    for (size_t i = 0; i < v.size(); ++i) {
      if (i) out += open_lines ? "," : ", ";
      if (open_lines) newline(depth + 1);
      write(v[i], indent, depth + 1, out);
    }
    if (open_lines) newline(depth);
    out += ']';
  } else {
    out += v.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  }
}

}  // namespace

std::string python_json(const nlohmann::ordered_json& value, int indent) {
  std::string out;
  write(value, indent, 0, out);
  return out;
}

}  // namespace larql
