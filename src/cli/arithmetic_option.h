// --arithmetic, for every command that computes: how products with bf16 weights are done
// (kernels/dtype.h's Arithmetic). LARQL_ARITHMETIC says the same; the flag beats it.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <optional>
#include <string>

#include "base/errors.h"
#include "model/model.h"

namespace larql::cli {

inline void add_arithmetic_option(CLI::App* cmd, std::optional<std::string>& name) {
  cmd->add_option("--arithmetic", name,
                  "products with bf16 weights: f32 (exact; the default) or bf16-dot (activations rounded to bf16, "
                  "the CPU's bf16 dot product where it has one); also LARQL_ARITHMETIC");
}

// Sets the chosen arithmetic on every matrix of `model`.
inline Status apply_arithmetic(Model& model, const std::optional<std::string>& flag) {
  const char* env = std::getenv("LARQL_ARITHMETIC");
  const std::string name = flag ? *flag : env && *env ? env : "f32";
  const auto arithmetic = arithmetic_from_name(name);
  if (!arithmetic)
    return make_error(ErrorCode::invalid_argument,
                      std::string(flag ? "--arithmetic" : "LARQL_ARITHMETIC") + " takes f32 or bf16-dot, not \"" + name + "\"");
  model.use_arithmetic(*arithmetic);
  return Ok{};
}

}  // namespace larql::cli
