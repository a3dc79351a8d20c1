// PROTOCOL §6 and §11 knobs: LARQL_F16_WIRE, LARQL_I8_WIRE, LARQL_Q8_WIRE, --wire, --wire-i8 and --no-wire-q8.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "wire/accept.h"
#include "wire/wire_config.h"

namespace larql::wire {
namespace {

EnvLookup env_of(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

Encoding preferred(std::optional<std::string_view> cli, std::map<std::string, std::string> vars) {
  auto w = client_wire(cli, env_of(std::move(vars)));
  EXPECT_TRUE(w.ok()) << w.error().message;
  return w->preferred;
}

TEST(ClientWire, DefaultIsF16WithF32Fallback) {
  auto w = client_wire(std::nullopt, env_of({}));
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->preferred, Encoding::f16);
  EXPECT_EQ(w->accept, "application/x-larql-ffn-f16, application/x-larql-ffn;q=0.5");
  EXPECT_EQ(w->accept_for_logits, w->accept);
}

TEST(ClientWire, EnvironmentSwitches) {
  EXPECT_EQ(preferred(std::nullopt, {{"LARQL_F16_WIRE", "0"}}), Encoding::f32);
  EXPECT_EQ(preferred(std::nullopt, {{"LARQL_F16_WIRE", "1"}}), Encoding::f16);
  EXPECT_EQ(preferred(std::nullopt, {{"LARQL_I8_WIRE", "1"}}), Encoding::i8);
  EXPECT_EQ(preferred(std::nullopt, {{"LARQL_I8_WIRE", "0"}}), Encoding::f16);
  EXPECT_EQ(preferred(std::nullopt, {{"LARQL_I8_WIRE", ""}, {"LARQL_F16_WIRE", ""}}), Encoding::f16);
}

TEST(ClientWire, ExplicitWireBeatsEnvironment) {
  EXPECT_EQ(preferred("f32", {{"LARQL_I8_WIRE", "1"}}), Encoding::f32);
  EXPECT_EQ(preferred("f16", {{"LARQL_F16_WIRE", "0"}}), Encoding::f16);
  EXPECT_EQ(preferred("i8", {{"LARQL_F16_WIRE", "0"}}), Encoding::i8);
}

TEST(ClientWire, I8AcceptLadderAndOptOutOfF16) {
  auto w = client_wire(std::nullopt, env_of({{"LARQL_I8_WIRE", "1"}}));
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->accept, "application/x-larql-ffn-i8, application/x-larql-ffn-f16;q=0.5, application/x-larql-ffn;q=0.25");
  EXPECT_EQ(w->accept_for_logits, "application/x-larql-ffn-f16, application/x-larql-ffn;q=0.5");
  // A server without i8 answers this client in f16, one without f16 or i8 in f32.
  EXPECT_EQ(negotiate_response_encoding(w->accept, {Encoding::f16, Encoding::q8}), Encoding::f16);
  EXPECT_EQ(negotiate_response_encoding(w->accept, {}), Encoding::f32);

  auto no_f16 = client_wire(std::nullopt, env_of({{"LARQL_I8_WIRE", "1"}, {"LARQL_F16_WIRE", "0"}}));
  ASSERT_TRUE(no_f16.ok());
  EXPECT_EQ(no_f16->preferred, Encoding::i8);
  EXPECT_EQ(negotiate_response_encoding(no_f16->accept, {Encoding::f16}), Encoding::f32);
}

TEST(ClientWire, Q8AcceptLadderAndOptOutOfF16) {
  auto w = client_wire(std::nullopt, env_of({{"LARQL_Q8_WIRE", "1"}}));
  ASSERT_TRUE(w.ok()) << w.error().message;
  EXPECT_EQ(w->preferred, Encoding::q8);
  EXPECT_EQ(w->accept, "application/x-larql-ffn-q8, application/x-larql-ffn-f16;q=0.5, application/x-larql-ffn;q=0.25");
  EXPECT_EQ(w->ladder, (std::vector<Encoding>{Encoding::q8, Encoding::f16, Encoding::f32}));
  EXPECT_EQ(w->request_encoding({Encoding::f32, Encoding::f16, Encoding::q8}), Encoding::q8);
  EXPECT_EQ(w->request_encoding({Encoding::f32, Encoding::f16, Encoding::i8}), Encoding::f16);
  EXPECT_EQ(w->request_encoding({Encoding::f32}), Encoding::f32);
  EXPECT_EQ(w->request_encoding({}), Encoding::f32);  // a server that lists nothing still takes f32

  // Rows read straight into logits come back in f16 (then f32).
  EXPECT_EQ(w->accept_for_logits, "application/x-larql-ffn-f16, application/x-larql-ffn;q=0.5");

  auto no_f16 = client_wire(std::nullopt, env_of({{"LARQL_Q8_WIRE", "1"}, {"LARQL_F16_WIRE", "0"}}));
  ASSERT_TRUE(no_f16.ok());
  EXPECT_EQ(no_f16->accept, "application/x-larql-ffn-q8, application/x-larql-ffn;q=0.5");
  EXPECT_EQ(no_f16->accept_for_logits, "application/x-larql-ffn");
  EXPECT_EQ(no_f16->request_encoding({Encoding::f32, Encoding::f16}), Encoding::f32);

  EXPECT_EQ(preferred("q8", {}), Encoding::q8);
  EXPECT_EQ(preferred("f16", {{"LARQL_Q8_WIRE", "1"}}), Encoding::f16);
  EXPECT_EQ(preferred(std::nullopt, {{"LARQL_Q8_WIRE", "0"}}), Encoding::f16);
}

TEST(ClientWire, Q8AndI8TogetherAreAnErrorUnlessWireChooses) {
  auto both = client_wire(std::nullopt, env_of({{"LARQL_Q8_WIRE", "1"}, {"LARQL_I8_WIRE", "1"}}));
  ASSERT_FALSE(both.ok());
  EXPECT_EQ(both.error().code, ErrorCode::invalid_argument);
  EXPECT_NE(both.error().message.find("choose one"), std::string::npos);
  EXPECT_EQ(preferred("q8", {{"LARQL_Q8_WIRE", "1"}, {"LARQL_I8_WIRE", "1"}}), Encoding::q8);
}

TEST(ClientWire, InvalidValuesNameTheVariable) {
  for (const char* bad : {"yes", "2", "true", " 1"}) {
    auto w = client_wire(std::nullopt, env_of({{"LARQL_F16_WIRE", bad}}));
    ASSERT_FALSE(w.ok()) << bad;
    EXPECT_EQ(w.error().code, ErrorCode::invalid_argument);
    EXPECT_NE(w.error().message.find("LARQL_F16_WIRE"), std::string::npos);
    // Even an explicit --wire does not hide a broken environment.
    EXPECT_FALSE(client_wire("f32", env_of({{"LARQL_I8_WIRE", bad}})).ok());
  }
  auto w = client_wire("f8", env_of({}));
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.error().message.find("--wire 'f8'"), std::string::npos);
}

EncodingSet offered(ServerWireFlags flags, size_t hidden, std::map<std::string, std::string> vars) {
  auto s = server_encodings(flags, hidden, env_of(std::move(vars)));
  EXPECT_TRUE(s.ok()) << s.error().message;
  return s.ok() ? *s : EncodingSet{};
}

TEST(ServerWire, I8OnlyWhenEnabled) {
  const EncodingSet base{Encoding::f32, Encoding::f16, Encoding::q8};
  EXPECT_EQ(offered({}, 64, {}), base);
  EncodingSet with_i8 = base;
  with_i8.insert(Encoding::i8);
  EXPECT_EQ(offered({.i8 = true}, 64, {}), with_i8);
  EXPECT_EQ(offered({}, 64, {{"LARQL_I8_WIRE", "1"}}), with_i8);
  EXPECT_EQ(offered({.i8 = true}, 64, {{"LARQL_I8_WIRE", "0"}}), with_i8);
  auto bad = server_encodings({}, 64, env_of({{"LARQL_I8_WIRE", "on"}}));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("LARQL_I8_WIRE"), std::string::npos);
}

TEST(ServerWire, Q8ByDefaultWhenHiddenIsAMultipleOf32) {
  const EncodingSet no_q8{Encoding::f32, Encoding::f16};
  EXPECT_TRUE(offered({}, 384, {}).contains(Encoding::q8));
  EXPECT_EQ(offered({}, 288, {}), (EncodingSet{Encoding::f32, Encoding::f16, Encoding::q8}));
  EXPECT_EQ(offered({}, 48, {}), no_q8);  // not whole blocks
  EXPECT_EQ(offered({}, 100, {{"LARQL_Q8_WIRE", "1"}}), no_q8);
  EXPECT_EQ(offered({.no_q8 = true}, 64, {}), no_q8);
  EXPECT_EQ(offered({}, 64, {{"LARQL_Q8_WIRE", "0"}}), no_q8);
  EXPECT_EQ(offered({.no_q8 = true}, 64, {{"LARQL_Q8_WIRE", "1"}}), no_q8);  // the flag beats the environment
  EXPECT_FALSE(server_encodings({}, 64, env_of({{"LARQL_Q8_WIRE", "yes"}})).ok());
  EXPECT_EQ(describe(offered({.i8 = true}, 64, {})), "f32,f16,q8,i8");
}

}  // namespace
}  // namespace larql::wire
