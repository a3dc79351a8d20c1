// The model a computing command runs on: loaded, set to the chosen arithmetic (--arithmetic
// or LARQL_ARITHMETIC), and the loader's notes printed under the command's name.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "cli/arithmetic_option.h"
#include "cli/model_notes.h"
#include "model/loader.h"

namespace larql::cli {

inline Result<Model> load_command_model(std::string_view command, const std::string& path,
                                        const std::optional<std::string>& arithmetic) {
  auto model = load_model(path);
  if (!model) return model.error();
  if (auto applied = apply_arithmetic(*model, arithmetic); !applied) return applied.error();
  print_model_notes(*model, command);
  return model;
}

}  // namespace larql::cli
