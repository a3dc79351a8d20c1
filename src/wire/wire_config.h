// Which wire format a client or server uses, from --wire flags and the environment
// (PROTOCOL §6): LARQL_F16_WIRE=0 opts a client out of f16, LARQL_I8_WIRE=1 opts into
// i8, an explicit --wire beats both. Values other than "0"/"1" are an error; empty = unset.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "wire/encoding.h"
#include "wire/errors.h"

namespace larql::wire {

inline constexpr const char* kEnvF16Wire = "LARQL_F16_WIRE";
inline constexpr const char* kEnvI8Wire = "LARQL_I8_WIRE";

// Reads an environment variable; returns nullptr when unset. Injected for tests.
using EnvLookup = std::function<const char*(const char*)>;
EnvLookup process_env();

// "0" → false, "1" → true, unset or empty → nullopt, anything else → invalid_argument
// naming the variable and the value.
Result<std::optional<bool>> read_switch(const EnvLookup& env, const char* name);

struct ClientWire {
  Encoding preferred;   // the encoding of requests (when the server accepts it)
  std::string accept;   // the Accept header to send
};

// The client's wire choice. `cli_wire` is the --wire value if given ("f32", "f16", "i8").
Result<ClientWire> client_wire(std::optional<std::string_view> cli_wire, const EnvLookup& env);

// Whether a server offers i8: --wire-i8 or LARQL_I8_WIRE=1.
Result<bool> server_i8_enabled(bool cli_flag, const EnvLookup& env);

}  // namespace larql::wire
