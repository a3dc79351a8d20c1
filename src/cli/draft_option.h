// --draft, shared by the commands that decode: "lookup" or "lookup:N" (prompt-lookup drafts
// matching the text's tail of up to N tokens).
#pragma once

#include <charconv>
#include <string>

#include "base/errors.h"
#include "infer/generate.h"

namespace larql::cli {

inline Result<SpeculativeOptions> parse_draft_option(const std::string& text) {
  SpeculativeOptions spec;
  if (text == "lookup") return spec;
  if (text.starts_with("lookup:")) {
    const std::string n = text.substr(7);
    size_t value = 0;
    const auto [end, ec] = std::from_chars(n.data(), n.data() + n.size(), value);
    if (ec == std::errc() && end == n.data() + n.size() && value >= 1 && value <= 64) {
      spec.max_ngram = value;
      return spec;
    }
  }
  return make_error(ErrorCode::invalid_argument,
                    "--draft '" + text + "': expected lookup or lookup:N (N from 1 to 64, the longest tail matched)");
}

}  // namespace larql::cli
