#include "wire/session_codec.h"

#include <cstring>

#include "base/byte_io.h"

namespace larql::wire {
namespace {

std::string str(uint64_t v) { return std::to_string(v); }

// Bytes of one row (a position block) in `encoding`; nullopt when the encoding cannot carry
// `hidden` values.
std::optional<uint64_t> row_bytes(Encoding encoding, size_t hidden) {
  if (!encoding_fits_hidden(encoding, hidden)) return std::nullopt;
  return values_byte_size(encoding, 1, hidden);
}

Error cannot_carry(Encoding encoding, size_t hidden) {
  return make_error(ErrorCode::unsupported_media_type, std::string(encoding_name(encoding)) + " cannot carry hidden=" +
                                                           str(hidden) + " values per position (not a multiple of 32)");
}

// a · b + c in 64 bits, nullopt on overflow.
std::optional<uint64_t> mul_add(uint64_t a, uint64_t b, uint64_t c) {
  uint64_t product, sum;
  if (__builtin_mul_overflow(a, b, &product) || __builtin_add_overflow(product, c, &sum)) return std::nullopt;
  return sum;
}

// Frames steps and tokens ahead of `value_bytes` bytes of values; returns where they go.
uint8_t* write_request_head(std::span<const SessionStep> steps, std::span<const uint32_t> tokens, size_t value_bytes,
                            std::string& out) {
  out.resize(kWalkLayersHeader + kSessionEntryBytes * steps.size() + 4 * tokens.size() + value_bytes);
  auto* p = reinterpret_cast<uint8_t*>(out.data());
  store_u32(p, uint32_t(steps.size()));
  store_u32(p + 4, kWalkLayersFlags);
  p += kWalkLayersHeader;
  for (const SessionStep& s : steps) {
    std::memcpy(p, s.id.data(), kSessionIdBytes);
    store_u32(p + 16, s.step);
    store_u32(p + 20, s.start);
    store_u32(p + 24, s.rows);
    store_u32(p + 28, s.out_from);
    p += kSessionEntryBytes;
  }
  for (uint32_t t : tokens) store_u32(p, t), p += 4;
  return p;
}

uint8_t* write_response_head(uint32_t sessions, float latency_ms, size_t value_bytes, std::string& out) {
  out.resize(kWalkLayersHeader + value_bytes);
  auto* p = reinterpret_cast<uint8_t*>(out.data());
  store_u32(p, sessions);
  store_f32(p + 4, latency_ms);
  return p + kWalkLayersHeader;
}

// `rows` rows of `values` behind the head `write_head(value bytes)` writes, in `encoding`,
// or in f32 when it cannot carry them; `non_finite` (naming `what`) when f32 cannot either.
template <typename WriteHead>
Result<EncodeOutcome> encode_rows(Encoding encoding, size_t rows, size_t hidden, std::span<const float> values, ErrorCode non_finite,
                                  const char* what, const WriteHead& write_head) {
  EncodeOutcome outcome{encoding, false};
  for (;;) {
    uint8_t* p = write_head(*row_bytes(outcome.encoding, hidden) * rows);
    if (rows == 0 || write_values(outcome.encoding, values.data(), rows, hidden, p)) return outcome;
    if (outcome.encoding == Encoding::f32)
      return make_error(non_finite, std::string(what) + " holds a non-finite value: " + first_non_finite(values, hidden));
    outcome = {Encoding::f32, true};
  }
}

}  // namespace

std::string session_id_hex(const SessionId& id) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * kSessionIdBytes);
  for (uint8_t b : id) out += kDigits[b >> 4], out += kDigits[b & 15];
  return out;
}

std::optional<SessionId> parse_session_id(std::string_view hex) {
  if (hex.size() != 2 * kSessionIdBytes) return std::nullopt;
  auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  SessionId id;
  for (size_t i = 0; i < kSessionIdBytes; ++i) {
    const int hi = digit(hex[2 * i]), lo = digit(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    id[i] = uint8_t(hi << 4 | lo);
  }
  return id;
}

Result<WalkLayersRequestView> parse_walk_layers_request(Bytes body, Encoding encoding, size_t hidden, size_t max_sessions) {
  const auto row = row_bytes(encoding, hidden);
  if (!row) return cannot_carry(encoding, hidden);
  if (body.size() < kWalkLayersHeader)
    return make_error(ErrorCode::truncated, "the body has " + str(body.size()) + " bytes; a walk-layers request starts with " +
                                                str(kWalkLayersHeader) + " ([n u32][flags u32])");
  const uint8_t* p = body.data();
  WalkLayersRequestView view;
  const uint32_t n = load_u32(p);
  view.flags = load_u32(p + 4);
  const uint64_t room = (body.size() - kWalkLayersHeader) / kSessionEntryBytes;
  if (n == 0 || n > max_sessions || n > room)
    return make_error(ErrorCode::bad_sequence_count,
                      "the request names " + str(n) + " sessions; expected 1 to " + str(max_sessions) +
                          (n > room && n != 0 ? ", and the body of " + str(body.size()) + " bytes holds at most " + str(room) + " entries"
                                              : ""));
  p += kWalkLayersHeader;
  view.steps.resize(n);
  for (SessionStep& s : view.steps) {
    std::memcpy(s.id.data(), p, kSessionIdBytes);
    s.step = load_u32(p + 16);
    s.start = load_u32(p + 20);
    s.rows = load_u32(p + 24);
    s.out_from = load_u32(p + 28);
    view.total_rows += s.rows;  // n < 2^32 rows of < 2^32 each: no overflow
    p += kSessionEntryBytes;
  }
  const uint64_t framed = kWalkLayersHeader + kSessionEntryBytes * uint64_t(n);
  const auto tokens_end = mul_add(4, view.total_rows, framed);
  const auto expected = tokens_end ? mul_add(view.total_rows, *row, *tokens_end) : std::nullopt;
  if (!expected || *expected != body.size())
    return make_error(ErrorCode::bad_length,
                      "the body has " + str(body.size()) + " bytes; " + str(n) + " sessions of " + str(view.total_rows) +
                          " rows in all take " + (expected ? str(*expected) : std::string("more than 2^64")) + " (8 + 28·" +
                          str(n) + " + 4·" + str(view.total_rows) + " token bytes + " + str(view.total_rows) + " rows of " +
                          str(*row) + " " + std::string(encoding_name(encoding)) + " bytes)");
  if (view.flags != kWalkLayersFlags)
    return make_error(ErrorCode::bad_flags, "flags are " + str(view.flags) + "; v1.2 defines only 1");
  view.tokens.resize(view.total_rows);
  for (uint32_t& t : view.tokens) t = load_u32(p), p += 4;
  view.values = {p, size_t(view.total_rows * *row)};
  return view;
}

void write_walk_layers_request(std::span<const SessionStep> steps, std::span<const uint32_t> tokens, Bytes values,
                               std::string& out) {
  uint8_t* p = write_request_head(steps, tokens, values.size(), out);
  if (!values.empty()) std::memcpy(p, values.data(), values.size());
}

Result<EncodeOutcome> encode_walk_layers_request(Encoding encoding, std::span<const SessionStep> steps,
                                                 std::span<const uint32_t> tokens, size_t hidden,
                                                 std::span<const float> values, std::string& out) {
  if (!row_bytes(encoding, hidden)) return cannot_carry(encoding, hidden);
  if (values.size() != tokens.size() * hidden)
    return make_error(ErrorCode::bad_length, "a step has " + str(values.size()) + " values for " + str(tokens.size()) +
                                                 " rows of " + str(hidden));
  return encode_rows(encoding, tokens.size(), hidden, values, ErrorCode::non_finite_input, "a step's residual",
                     [&](size_t value_bytes) { return write_request_head(steps, tokens, value_bytes, out); });
}

Result<WalkLayersResponseView> parse_walk_layers_response(Bytes body, Encoding encoding, size_t hidden, uint32_t sessions,
                                                          uint64_t rows) {
  const auto row = row_bytes(encoding, hidden);
  if (!row) return cannot_carry(encoding, hidden);
  if (body.size() < kWalkLayersHeader)
    return make_error(ErrorCode::truncated, "a walk-layers response of " + str(body.size()) + " bytes; expected at least " +
                                                str(kWalkLayersHeader));
  WalkLayersResponseView view;
  view.sessions = load_u32(body.data());
  view.latency_ms = load_f32(body.data() + 4);
  view.rows = rows;
  if (view.sessions != sessions)
    return make_error(ErrorCode::bad_sequence_count,
                      "the response has " + str(view.sessions) + " sessions; the request named " + str(sessions));
  const auto expected = mul_add(rows, *row, kWalkLayersHeader);
  if (!expected || *expected != body.size())
    return make_error(ErrorCode::bad_length, "a walk-layers response of " + str(body.size()) + " bytes; " + str(rows) + " rows of " +
                                                 std::string(encoding_name(encoding)) + " take " + str(expected.value_or(0)));
  view.values = body.subspan(kWalkLayersHeader);
  return view;
}

Result<EncodeOutcome> encode_walk_layers_response(Encoding encoding, uint32_t sessions, float latency_ms, size_t hidden,
                                                  std::span<const float> values, std::string& out) {
  if (!row_bytes(encoding, hidden)) return cannot_carry(encoding, hidden);
  return encode_rows(encoding, values.size() / hidden, hidden, values, ErrorCode::non_finite_output, "a range's output",
                     [&](size_t value_bytes) { return write_response_head(sessions, latency_ms, value_bytes, out); });
}

void write_walk_layers_response(uint32_t sessions, float latency_ms, Bytes values, std::string& out) {
  uint8_t* p = write_response_head(sessions, latency_ms, values.size(), out);
  if (!values.empty()) std::memcpy(p, values.data(), values.size());
}

}  // namespace larql::wire
