#include "wire/wire_config.h"

#include <cstdlib>

namespace larql::wire {
namespace {

// The preferred encoding, then the ones below it that a client falls back to.
std::vector<Encoding> ladder_for(Encoding preferred, bool f16_allowed) {
  std::vector<Encoding> ladder{preferred};
  if (preferred != Encoding::f32 && preferred != Encoding::f16 && f16_allowed) ladder.push_back(Encoding::f16);
  if (preferred != Encoding::f32) ladder.push_back(Encoding::f32);
  return ladder;
}

// "q8, f16;q=0.5, f32;q=0.25" for the ladder q8 → f16 → f32 (as content types).
std::string accept_for(const std::vector<Encoding>& ladder) {
  static constexpr const char* kQ[] = {"", ";q=0.5", ";q=0.25"};
  std::string out;
  for (size_t i = 0; i < ladder.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::string(content_type(ladder[i])) + kQ[i];
  }
  return out;
}

ClientWire make_client_wire(Encoding preferred, bool f16_allowed) {
  auto ladder = ladder_for(preferred, f16_allowed);
  std::string accept = accept_for(ladder);
  std::string for_logits = encoding_info(preferred).scaled_integers
                               ? accept_for(ladder_for(f16_allowed ? Encoding::f16 : Encoding::f32, true))
                               : accept;
  return {preferred, std::move(ladder), std::move(accept), std::move(for_logits)};
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

Encoding ClientWire::request_encoding(EncodingSet server_accepts) const {
  for (Encoding e : ladder)
    if (server_accepts.contains(e)) return e;
  return Encoding::f32;
}

Result<ClientWire> client_wire(std::optional<std::string_view> cli_wire, const EnvLookup& env) {
  auto f16_switch = read_switch(env, kEnvF16Wire);
  if (!f16_switch) return f16_switch.error();
  auto i8_switch = read_switch(env, kEnvI8Wire);
  if (!i8_switch) return i8_switch.error();
  auto q8_switch = read_switch(env, kEnvQ8Wire);
  if (!q8_switch) return q8_switch.error();

  if (cli_wire) {
    auto chosen = encoding_from_name(*cli_wire);
    if (!chosen)
      return make_error(ErrorCode::invalid_argument,
                        "--wire '" + std::string(*cli_wire) + "' is not valid: expected " + encoding_names());
    return make_client_wire(*chosen, true);
  }
  const bool f16_allowed = f16_switch->value_or(true);
  const bool i8 = i8_switch->value_or(false), q8 = q8_switch->value_or(false);
  if (i8 && q8)
    return make_error(ErrorCode::invalid_argument, std::string(kEnvQ8Wire) + "=1 and " + kEnvI8Wire +
                                                       "=1 are both set: choose one (or pass --wire)");
  if (q8) return make_client_wire(Encoding::q8, f16_allowed);
  if (i8) return make_client_wire(Encoding::i8, f16_allowed);
  return make_client_wire(f16_allowed ? Encoding::f16 : Encoding::f32, true);
}

Result<EncodingSet> server_encodings(ServerWireFlags flags, size_t hidden, const EnvLookup& env) {
  auto i8_switch = read_switch(env, kEnvI8Wire);
  if (!i8_switch) return i8_switch.error();
  auto q8_switch = read_switch(env, kEnvQ8Wire);
  if (!q8_switch) return q8_switch.error();
  EncodingSet set{Encoding::f32, Encoding::f16};
  if (!flags.no_q8 && q8_switch->value_or(true) && encoding_fits_hidden(Encoding::q8, hidden)) set.insert(Encoding::q8);
  if (flags.i8 || i8_switch->value_or(false)) set.insert(Encoding::i8);
  return set;
}

std::string describe(EncodingSet set, std::string_view separator) {
  std::string out;
  for (Encoding e : set.members()) {
    if (!out.empty()) out += separator;
    out += encoding_name(e);
  }
  return out;
}

}  // namespace larql::wire
