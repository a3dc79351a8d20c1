// Which wire format a client or server uses, from --wire flags and the environment
// (PROTOCOL §6, §11). Client: LARQL_F16_WIRE=0 opts out of f16, LARQL_I8_WIRE=1 or
// LARQL_Q8_WIRE=1 opts into i8 or q8 (not both), an explicit --wire beats them all.
// Server: f32 and f16 always, q8 unless --no-wire-q8 or LARQL_Q8_WIRE=0 (and only when the
// hidden size is a multiple of 32), i8 with --wire-i8 or LARQL_I8_WIRE=1. Values other
// than "0"/"1" are an error; empty = unset.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/errors.h"
#include "wire/encoding.h"

namespace larql::wire {

inline constexpr const char* kEnvF16Wire = "LARQL_F16_WIRE";
inline constexpr const char* kEnvI8Wire = "LARQL_I8_WIRE";
inline constexpr const char* kEnvQ8Wire = "LARQL_Q8_WIRE";

// Reads an environment variable; returns nullptr when unset. Injected for tests.
using EnvLookup = std::function<const char*(const char*)>;
EnvLookup process_env();

// "0" → false, "1" → true, unset or empty → nullopt, anything else → invalid_argument
// naming the variable and the value.
Result<std::optional<bool>> read_switch(const EnvLookup& env, const char* name);

struct ClientWire {
  Encoding preferred;            // the encoding of requests (when the server accepts it)
  std::vector<Encoding> ladder;  // request encodings best first: preferred, then f16 (unless opted out), then f32
  std::string accept;            // the Accept header to send: the ladder with falling q-values
  // The Accept for rows the client turns into logits as they come (a session's last range,
  // PROTOCOL §13: the residual after the last layer): f16 (else f32) when the preferred
  // encoding is q8 or i8, whose error there reaches the logits undiluted (the final
  // residual's values are the largest of the stream); else `accept`. One row a token.
  std::string accept_for_logits;

  // The first encoding of the ladder a server lists (f32, which every server takes, when none is).
  Encoding request_encoding(EncodingSet server_accepts) const;
};

// The client's wire choice. `cli_wire` is the --wire value if given ("f32", "f16", "q8", "i8").
Result<ClientWire> client_wire(std::optional<std::string_view> cli_wire, const EnvLookup& env);

struct ServerWireFlags {
  bool i8 = false;     // --wire-i8
  bool no_q8 = false;  // --no-wire-q8
};

// The encodings a server offers for a model of `hidden` values per position.
Result<EncodingSet> server_encodings(ServerWireFlags flags, size_t hidden, const EnvLookup& env);

// "f32,f16,q8": the offered encodings in table order, for start-up lines and messages.
std::string describe(EncodingSet set, std::string_view separator = ",");

}  // namespace larql::wire
