// Gemma 4's value syntax for tool calls and their results, as its chat template writes
// them: JSON's numbers, true, false and null; strings between <|"|> marks, raw (no
// escapes); objects with bare keys ({key:value,...}, keys in the template's sorted order
// where it sorts); arrays as JSON's. Written here and read back into JSON text.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace larql {

inline constexpr std::string_view kGemma4Quote = "<|\"|>";

// A value as the template's format_argument writes it; `quote_keys` as its escape_keys
// (declarations quote the keys of mappings, calls and responses do not). Objects' keys are
// sorted (Jinja's dictsort); numbers are written as JSON writes them.
std::string gemma4_text(const nlohmann::ordered_json& value, bool quote_keys);

// An object's members as Jinja's dictsort orders them (its template sorts with it): by key,
// case ignored, stable.
std::vector<std::pair<std::string, const nlohmann::ordered_json*>> dictsorted(const nlohmann::ordered_json& object);

// The JSON text of a value in Gemma 4's syntax (a call's arguments), compact; nothing when
// the text is not one whole value.
std::optional<std::string> gemma4_to_json(std::string_view text);

}  // namespace larql
