// Binary messages of POST /v1/walk-layers (PROTOCOL §13): a step of one or more sessions of
// a layer range. Parsers check every length in 64-bit arithmetic before reading and return
// views into the body; the values sections are §5/§11 position blocks, so a response's is
// byte for byte a valid request's for the next range (a router passes it on undecoded).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/errors.h"
#include "wire/codec.h"
#include "wire/encoding.h"

namespace larql::wire {

inline constexpr uint32_t kWalkLayersFlags = 1;    // the only flags value of v1.2
inline constexpr size_t kSessionIdBytes = 16;
inline constexpr size_t kWalkLayersHeader = 8;     // n, flags | n, latency_ms
inline constexpr size_t kSessionEntryBytes = kSessionIdBytes + 16;  // id, step, start, rows, out_from

using SessionId = std::array<uint8_t, kSessionIdBytes>;

// 32 lowercase hex digits, the id's bytes in order.
std::string session_id_hex(const SessionId& id);
// nullopt unless exactly 32 hex digits (either case).
std::optional<SessionId> parse_session_id(std::string_view hex);

// One session's part of a step.
struct SessionStep {
  SessionId id{};
  uint32_t step = 0;
  uint32_t start = 0;
  uint32_t rows = 0;
  uint32_t out_from = 0;
};

struct WalkLayersRequestView {
  uint32_t flags = kWalkLayersFlags;
  std::vector<SessionStep> steps;
  std::vector<uint32_t> tokens;  // Σrows: the rows' token ids, session after session
  uint64_t total_rows = 0;       // Σrows
  Bytes values;                  // total_rows rows in the request encoding
};

// Framing, in §13's order: truncated (no header), bad_sequence_count (n = 0, above
// max_sessions, or more entries than the body holds), bad_length (the body is not exactly
// 8 + 28n + 4Σrows + Σrows · row bytes), bad_flags. The values are not inspected.
Result<WalkLayersRequestView> parse_walk_layers_request(Bytes body, Encoding encoding, size_t hidden, size_t max_sessions);

// Writes a request around values already encoded (`values`: Σrows rows), as a router
// re-framing a hop does.
void write_walk_layers_request(std::span<const SessionStep> steps, std::span<const uint32_t> tokens, Bytes values,
                               std::string& out);

// Encodes `values` (Σrows × hidden floats) and frames them; falls back to f32 when the
// encoding cannot carry them. non_finite_input for NaN or infinity (never sent).
Result<EncodeOutcome> encode_walk_layers_request(Encoding encoding, std::span<const SessionStep> steps,
                                                 std::span<const uint32_t> tokens, size_t hidden,
                                                 std::span<const float> values, std::string& out);

struct WalkLayersResponseView {
  uint32_t sessions = 0;
  float latency_ms = 0;
  uint64_t rows = 0;  // Σ(rows − out_from), as the caller expected
  Bytes values;
};

// Checks a response against what the request asked: `sessions` entries and `rows` rows back.
Result<WalkLayersResponseView> parse_walk_layers_response(Bytes body, Encoding encoding, size_t hidden, uint32_t sessions,
                                                          uint64_t rows);

// Encodes a response; falls back to f32 when the encoding cannot carry the values;
// non_finite_output for NaN or infinity.
Result<EncodeOutcome> encode_walk_layers_response(Encoding encoding, uint32_t sessions, float latency_ms, size_t hidden,
                                                  std::span<const float> values, std::string& out);

// Writes a response around values already encoded.
void write_walk_layers_response(uint32_t sessions, float latency_ms, Bytes values, std::string& out);

}  // namespace larql::wire
