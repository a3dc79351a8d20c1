// PROTOCOL §13's walk-layers messages: its byte vectors reproduced exactly, and framing
// errors in its order, with lengths checked in 64-bit arithmetic.
#include <gtest/gtest.h>

#include <cmath>

#include "base/byte_io.h"
#include "support/hex.h"
#include "wire/session_codec.h"

namespace larql::wire {
namespace {

using test::from_hex;
using test::to_hex;

const char* kRequestF32 =
    "01000000 01000000"
    "000102030405060708090a0b0c0d0e0f 03000000 05000000 02000000 00000000"
    "07000000 09000000"
    "0000803f 000000c0 0000003f 00000000 00000000 00000000 0000803f 0000803f";

SessionStep example_step() {
  SessionStep s{.step = 3, .start = 5, .rows = 2, .out_from = 0};
  for (uint8_t i = 0; i < 16; ++i) s.id[i] = i;
  return s;
}

TEST(SessionCodec, RequestVectorsInF32AndF16) {
  const std::vector<float> values{1, -2, 0.5, 0, 0, 0, 1, 1};
  const std::vector<uint32_t> tokens{7, 9};
  const SessionStep step = example_step();
  std::string out;
  ASSERT_TRUE(encode_walk_layers_request(Encoding::f32, {&step, 1}, tokens, 4, values, out).ok());
  EXPECT_EQ(to_hex(out), to_hex(from_hex(kRequestF32)));
  ASSERT_TRUE(encode_walk_layers_request(Encoding::f16, {&step, 1}, tokens, 4, values, out).ok());
  EXPECT_EQ(out.substr(0, out.size() - 16), from_hex(kRequestF32).substr(0, out.size() - 16));  // only the values change
  EXPECT_EQ(to_hex(out.substr(out.size() - 16)), to_hex(from_hex("003c 00c0 0038 0000 0000 0000 003c 003c")));

  auto view = parse_walk_layers_request(as_bytes(from_hex(kRequestF32)), Encoding::f32, 4, 8);
  ASSERT_TRUE(view.ok()) << view.error().message;
  ASSERT_EQ(view->steps.size(), 1u);
  EXPECT_EQ(view->steps[0].id, step.id);
  EXPECT_EQ(view->steps[0].step, 3u);
  EXPECT_EQ(view->steps[0].start, 5u);
  EXPECT_EQ(view->steps[0].rows, 2u);
  EXPECT_EQ(view->tokens, tokens);
  EXPECT_EQ(view->values.size(), 32u);
}

TEST(SessionCodec, ResponseVector) {
  const std::vector<float> values{1, 0, 0, 0, 0, 1, 0, 0};
  std::string out;
  ASSERT_TRUE(encode_walk_layers_response(Encoding::f32, 1, 1.5f, 4, values, out).ok());
  EXPECT_EQ(to_hex(out), to_hex(from_hex("01000000 0000c03f 0000803f 00000000 00000000 00000000 00000000 0000803f 00000000 00000000")));
  auto view = parse_walk_layers_response(as_bytes(out), Encoding::f32, 4, 1, 2);
  ASSERT_TRUE(view.ok());
  EXPECT_EQ(view->latency_ms, 1.5f);
  EXPECT_FALSE(parse_walk_layers_response(as_bytes(out), Encoding::f32, 4, 1, 3).ok());  // a row short
  EXPECT_FALSE(parse_walk_layers_response(as_bytes(out), Encoding::f32, 4, 2, 2).ok());  // another session count
}

TEST(SessionCodec, SessionIdsAreThirtyTwoHexDigits) {
  const SessionId id = example_step().id;
  EXPECT_EQ(session_id_hex(id), "000102030405060708090a0b0c0d0e0f");
  EXPECT_EQ(parse_session_id("000102030405060708090A0B0C0D0E0F"), id);
  EXPECT_FALSE(parse_session_id("000102030405060708090a0b0c0d0e0"));
  EXPECT_FALSE(parse_session_id("000102030405060708090a0b0c0d0e0g"));
  EXPECT_FALSE(parse_session_id(""));
}

ErrorCode code_of(const std::string& body, size_t max_sessions = 8) {
  auto r = parse_walk_layers_request(as_bytes(body), Encoding::f32, 4, max_sessions);
  EXPECT_FALSE(r.ok());
  return r.ok() ? ErrorCode::internal : r.error().code;
}

TEST(SessionCodec, FramingErrorsInTheProtocolsOrder) {
  const std::string good = from_hex(kRequestF32);
  EXPECT_EQ(code_of(good.substr(0, 7)), ErrorCode::truncated);
  std::string zero = good;
  store_u32(reinterpret_cast<uint8_t*>(zero.data()), 0);
  EXPECT_EQ(code_of(zero), ErrorCode::bad_sequence_count);
  EXPECT_EQ(code_of(good, 0), ErrorCode::bad_sequence_count);  // above --max-sessions
  std::string many = good;  // more entries than the body can hold
  store_u32(reinterpret_cast<uint8_t*>(many.data()), 5);
  EXPECT_EQ(code_of(many), ErrorCode::bad_sequence_count);
  EXPECT_EQ(code_of(good + "x"), ErrorCode::bad_length);
  EXPECT_EQ(code_of(good.substr(0, good.size() - 1)), ErrorCode::bad_length);
  std::string flags = good;
  store_u32(reinterpret_cast<uint8_t*>(flags.data()) + 4, 3);  // reserved bits
  EXPECT_EQ(code_of(flags), ErrorCode::bad_flags);
  // Two rules broken at once: the earlier wins (length before flags).
  EXPECT_EQ(code_of(flags + "x"), ErrorCode::bad_length);
}

TEST(SessionCodec, LengthsAreCheckedIn64BitArithmetic) {
  // rows = 2^32 − 1 in one entry, and two such entries: Σrows × row bytes overflows 32 bits
  // (and Σrows itself does), so only a 64-bit check refuses them for what they are.
  std::string body = from_hex(kRequestF32);
  store_u32(reinterpret_cast<uint8_t*>(body.data()) + 8 + 24, 0xFFFFFFFFu);
  EXPECT_EQ(code_of(body), ErrorCode::bad_length);
  std::string two = from_hex("02000000 01000000");
  for (int i = 0; i < 2; ++i) two += std::string(16, '\0') + from_hex("01000000 00000000 ffffffff 00000000");
  two += std::string(64, '\0');
  EXPECT_EQ(code_of(two), ErrorCode::bad_length);
  // start + rows past 2^32 is the service's context_full, not a framing error: framing passes.
  std::string late = from_hex(kRequestF32);
  store_u32(reinterpret_cast<uint8_t*>(late.data()) + 8 + 20, 0xFFFFFFFFu);
  EXPECT_TRUE(parse_walk_layers_request(as_bytes(late), Encoding::f32, 4, 8).ok());
}

TEST(SessionCodec, Q8NeedsWholeBlocksAndNonFiniteValuesAreNeverSent) {
  const SessionStep step = example_step();
  const std::vector<uint32_t> tokens{7, 9};
  std::string out;
  auto q8 = encode_walk_layers_request(Encoding::q8, {&step, 1}, tokens, 4, std::vector<float>(8, 1.0f), out);
  ASSERT_FALSE(q8.ok());
  EXPECT_EQ(q8.error().code, ErrorCode::unsupported_media_type);
  std::vector<float> nan(8, 0.0f);
  nan[5] = std::nanf("");
  auto r = encode_walk_layers_request(Encoding::f16, {&step, 1}, tokens, 4, nan, out);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::non_finite_input);
  // Too large for f16: falls back to f32, said so.
  auto big = encode_walk_layers_request(Encoding::f16, {&step, 1}, tokens, 4, std::vector<float>(8, 1e6f), out);
  ASSERT_TRUE(big.ok());
  EXPECT_TRUE(big->fell_back);
  EXPECT_EQ(big->encoding, Encoding::f32);
}

}  // namespace
}  // namespace larql::wire
