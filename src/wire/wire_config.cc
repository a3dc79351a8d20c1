#include "wire/wire_config.h"

#include <cstdlib>

namespace larql::wire {
namespace {

std::string accept_for(Encoding preferred, bool f16_allowed) {
  const std::string f32(kContentTypeF32), f16(kContentTypeF16), i8(kContentTypeI8);
  switch (preferred) {
    case Encoding::f32: return f32;
    case Encoding::f16: return f16 + ", " + f32 + ";q=0.5";
    case Encoding::i8:
      if (!f16_allowed) return i8 + ", " + f32 + ";q=0.5";
      return i8 + ", " + f16 + ";q=0.5, " + f32 + ";q=0.25";
  }
  return f32;
}

}  // namespace

EnvLookup process_env() {
  return [](const char* name) { return std::getenv(name); };
}

Result<std::optional<bool>> read_switch(const EnvLookup& env, const char* name) {
  const char* raw = env(name);
  if (raw == nullptr || *raw == '\0') return std::optional<bool>{};
  std::string_view v(raw);
  if (v == "0") return std::optional<bool>{false};
  if (v == "1") return std::optional<bool>{true};
  return make_error(ErrorCode::invalid_argument, std::string(name) + "='" + std::string(v) +
                                                     "' is not valid: expected 0 or 1 (or unset)");
}

Result<ClientWire> client_wire(std::optional<std::string_view> cli_wire, const EnvLookup& env) {
  auto f16_switch = read_switch(env, kEnvF16Wire);
  if (!f16_switch) return f16_switch.error();
  auto i8_switch = read_switch(env, kEnvI8Wire);
  if (!i8_switch) return i8_switch.error();

  if (cli_wire) {
    auto chosen = encoding_from_name(*cli_wire);
    if (!chosen)
      return make_error(ErrorCode::invalid_argument,
                        "--wire '" + std::string(*cli_wire) + "' is not valid: expected f32, f16 or i8");
    return ClientWire{*chosen, accept_for(*chosen, true)};
  }
  bool f16_allowed = f16_switch->value_or(true);
  if (i8_switch->value_or(false)) return ClientWire{Encoding::i8, accept_for(Encoding::i8, f16_allowed)};
  Encoding e = f16_allowed ? Encoding::f16 : Encoding::f32;
  return ClientWire{e, accept_for(e, true)};
}

Result<bool> server_i8_enabled(bool cli_flag, const EnvLookup& env) {
  auto i8_switch = read_switch(env, kEnvI8Wire);
  if (!i8_switch) return i8_switch.error();
  return cli_flag || i8_switch->value_or(false);
}

}  // namespace larql::wire
