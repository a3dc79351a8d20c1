// The loader's notes on a model (what it skipped or assumed), printed by every command
// that loads one, on stderr so that JSON output stays clean.
#pragma once

#include <iostream>
#include <string_view>

#include "model/model.h"

namespace larql {

inline void print_model_notes(const Model& model, std::string_view command) {
  for (const auto& note : model.notes) std::cerr << command << ": " << model.config.name << ": " << note << "\n";
}

}  // namespace larql
