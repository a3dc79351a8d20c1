// Bounds of numeric options, said the way a person reads them: "--temperature: must be ≥ 0
// (got -1)". CLI11's NonNegativeNumber and PositiveNumber print their bounds with
// std::to_string (0 to 1.797…e308 written out in 309 digits), and its unsigned options take
// "-1" as a huge number; these replace them everywhere.
#pragma once

#include <CLI/CLI.hpp>
#include <charconv>
#include <cmath>
#include <string>

namespace larql::cli {

// A number ≥ min (or > min when `strictly`), any finite value of the option's type.
inline CLI::Validator at_least(double min, bool strictly, std::string type_name) {
  return CLI::Validator(
      [min, strictly](std::string& text) -> std::string {
        double v = 0;
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
        const std::string bound = std::string(strictly ? "> " : "≥ ") + CLI::detail::to_string(min);
        if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(v))
          return "must be a number " + bound + " (got '" + text.substr(0, 40) + "')";
        if (strictly ? !(v > min) : !(v >= min)) return "must be " + bound + " (got " + text.substr(0, 40) + ")";
        return "";
      },
      std::move(type_name));
}

inline CLI::Validator non_negative() { return at_least(0, false, "NONNEGATIVE"); }
inline CLI::Validator positive() { return at_least(0, true, "POSITIVE"); }

// Every unsigned option of `app` and its subcommands refuses a sign ("-1" would otherwise
// be read as 2^64 − 1). Call once every command is added.
inline void check_unsigned_options(CLI::App& app) {
  for (CLI::Option* opt : app.get_options())
    if (opt->get_type_name().rfind("UINT", 0) == 0)
      opt->check(CLI::Validator(
          [](std::string& text) -> std::string {
            return text.find('-') == std::string::npos ? "" : "must be a whole number ≥ 0 (got " + text.substr(0, 40) + ")";
          },
          ""));
  for (CLI::App* sub : app.get_subcommands({})) check_unsigned_options(*sub);
}

}  // namespace larql::cli
