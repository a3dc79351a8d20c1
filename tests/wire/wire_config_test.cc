// PROTOCOL §6 knobs: LARQL_F16_WIRE, LARQL_I8_WIRE, --wire and --wire-i8.
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
  // A server without i8 answers this client in f16, one without f16 or i8 in f32.
  EXPECT_EQ(negotiate_response_encoding(w->accept, {.f16 = true, .i8 = false}), Encoding::f16);
  EXPECT_EQ(negotiate_response_encoding(w->accept, {.f16 = false, .i8 = false}), Encoding::f32);

  auto no_f16 = client_wire(std::nullopt, env_of({{"LARQL_I8_WIRE", "1"}, {"LARQL_F16_WIRE", "0"}}));
  ASSERT_TRUE(no_f16.ok());
  EXPECT_EQ(no_f16->preferred, Encoding::i8);
  EXPECT_EQ(negotiate_response_encoding(no_f16->accept, {.f16 = true, .i8 = false}), Encoding::f32);
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

TEST(ServerWire, I8OnlyWhenEnabled) {
  EXPECT_FALSE(*server_i8_enabled(false, env_of({})));
  EXPECT_TRUE(*server_i8_enabled(true, env_of({})));
  EXPECT_TRUE(*server_i8_enabled(false, env_of({{"LARQL_I8_WIRE", "1"}})));
  EXPECT_TRUE(*server_i8_enabled(true, env_of({{"LARQL_I8_WIRE", "0"}})));
  auto bad = server_i8_enabled(false, env_of({{"LARQL_I8_WIRE", "on"}}));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("LARQL_I8_WIRE"), std::string::npos);
}

}  // namespace
}  // namespace larql::wire
