// --draft, shared by the commands that decode: "lookup" or "lookup:N" (prompt-lookup drafts
// matching the text's tail of up to N tokens), or a draft model's path (a small model with
// the target's tokenizer, run locally: infer/model_draft.h).
#pragma once

#include <charconv>
#include <filesystem>
#include <optional>
#include <string>

#include "base/errors.h"
#include "infer/generate.h"

namespace larql::cli {

struct DraftChoice {
  SpeculativeOptions options;
  std::optional<std::string> model;  // a draft model to load; none: prompt lookup
};

inline Result<DraftChoice> parse_draft_option(const std::string& text) {
  DraftChoice choice;
  if (text == "lookup") return choice;
  if (text.starts_with("lookup:")) {
    const std::string n = text.substr(7);
    size_t value = 0;
    const auto [end, ec] = std::from_chars(n.data(), n.data() + n.size(), value);
    if (ec == std::errc() && end == n.data() + n.size() && value >= 1 && value <= 64) {
      choice.options.max_ngram = value;
      return choice;
    }
  } else if (std::error_code ec; std::filesystem::exists(text, ec)) {
    choice.model = text;
    return choice;
  }
  return make_error(ErrorCode::invalid_argument, "--draft '" + text +
                                                     "': expected lookup, lookup:N (N from 1 to 64, the longest tail matched) "
                                                     "or the path of a draft model with the target's tokenizer");
}

}  // namespace larql::cli
