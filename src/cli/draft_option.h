// --draft, shared by the commands that decode: "lookup" or "lookup:N" (prompt-lookup drafts
// matching the text's tail of up to N tokens), or a draft model's path (a small model with
// the target's tokenizer, run locally: infer/model_draft.h); and --draft-max and
// --draft-branches, what a pass verifies.
#pragma once

#include <CLI/CLI.hpp>
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

struct DraftShape {
  size_t max_draft = SpeculativeOptions{}.max_draft;
  size_t branches = 1;
};

inline void add_draft_shape_options(CLI::App* cmd, DraftShape& shape) {
  cmd->add_option("--draft-max", shape.max_draft, "speculative decoding: drafted tokens a pass verifies at most")
      ->check(CLI::Range(size_t{1}, kMaxDraft))
      ->capture_default_str();
  cmd->add_option("--draft-branches", shape.branches,
                  "--draft lookup: up to this many distinct continuations a pass, verified as one tree of at most "
                  "--draft-max + 1 rows (1: one chain); over a slow link try --draft-max 16 --draft-branches 4")
      ->check(CLI::Range(1, 16))
      ->capture_default_str();
}

inline Result<DraftChoice> parse_draft_option(const std::string& text, const DraftShape& shape = {}) {
  DraftChoice choice;
  choice.options.max_draft = shape.max_draft;
  choice.options.branches = shape.branches;
  bool parsed = text == "lookup";
  if (!parsed && text.starts_with("lookup:")) {
    const std::string n = text.substr(7);
    size_t value = 0;
    const auto [end, ec] = std::from_chars(n.data(), n.data() + n.size(), value);
    parsed = ec == std::errc() && end == n.data() + n.size() && value >= 1 && value <= 64;
    choice.options.max_ngram = value;
  } else if (std::error_code ec; !parsed && std::filesystem::exists(text, ec)) {
    choice.model = text;
    parsed = true;
  }
  if (!parsed)
    return make_error(ErrorCode::invalid_argument, "--draft '" + text +
                                                       "': expected lookup, lookup:N (N from 1 to 64, the longest tail matched) "
                                                       "or the path of a draft model with the target's tokenizer");
  if (choice.model && shape.branches > 1)
    return make_error(ErrorCode::invalid_argument, "--draft-branches " + std::to_string(shape.branches) +
                                                       ": trees of drafts are prompt lookup's (--draft lookup); a draft "
                                                       "model proposes one chain");
  return choice;
}

}  // namespace larql::cli
