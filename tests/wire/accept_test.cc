// PROTOCOL §6: Accept parsing and the choice of response encoding.
#include <gtest/gtest.h>

#include "wire/accept.h"
#include "wire/encoding.h"

namespace larql::wire {
namespace {

constexpr EncodingSet kAll{Encoding::f32, Encoding::f16, Encoding::q8, Encoding::i8};
constexpr EncodingSet kDefault{Encoding::f32, Encoding::f16, Encoding::q8};  // a server's default
constexpr EncodingSet kNoI8{Encoding::f32, Encoding::f16};                    // --no-wire-q8, no --wire-i8

struct Case {
  const char* accept;
  EncodingSet enabled;
  Encoding expected;
};

class Negotiation : public ::testing::TestWithParam<Case> {};

TEST_P(Negotiation, PicksTheExpectedEncoding) {
  const Case& c = GetParam();
  EXPECT_EQ(negotiate_response_encoding(c.accept, c.enabled), c.expected)
      << "Accept: " << c.accept << " (q8 " << (c.enabled.contains(Encoding::q8) ? "on" : "off") << ", i8 "
      << (c.enabled.contains(Encoding::i8) ? "on" : "off") << ")";
}

constexpr const char* kReferenceClient =
    "application/x-larql-ffn-i8, application/x-larql-ffn-f16, application/x-larql-ffn";

INSTANTIATE_TEST_SUITE_P(
    Protocol, Negotiation,
    ::testing::Values(
        // The reference client's exact header: i8 where enabled, else f16 (the ADR's ladder).
        Case{kReferenceClient, kAll, Encoding::i8}, Case{kReferenceClient, kNoI8, Encoding::f16},
        // No Accept, or nothing acceptable among the binary types: f32.
        Case{"", kAll, Encoding::f32}, Case{"application/json", kAll, Encoding::f32},
        Case{"text/html, image/png", kAll, Encoding::f32}, Case{"application/x-larql-ffn-q4", kAll, Encoding::f32},
        // Our clients' headers.
        Case{"application/x-larql-ffn-f16, application/x-larql-ffn;q=0.5", kAll, Encoding::f16},
        Case{"application/x-larql-ffn-i8, application/x-larql-ffn-f16;q=0.5, application/x-larql-ffn;q=0.25", kNoI8,
             Encoding::f16},
        // q-values decide before order.
        Case{"application/x-larql-ffn;q=0.9, application/x-larql-ffn-f16", kAll, Encoding::f16},
        Case{"application/x-larql-ffn-f16;q=0.4, application/x-larql-ffn;q=0.5", kAll, Encoding::f32},
        Case{"application/x-larql-ffn-f16;q=0.501, application/x-larql-ffn;q=0.5", kAll, Encoding::f16},
        // Ties on q: first listed wins.
        Case{"application/x-larql-ffn, application/x-larql-ffn-f16", kAll, Encoding::f32},
        Case{"application/x-larql-ffn-f16;q=0.8, application/x-larql-ffn-i8;q=0.8", kAll, Encoding::f16},
        // Wildcards: */* alone → f32 (curl's default); a named type beats a wildcard tie.
        Case{"*/*", kAll, Encoding::f32}, Case{"application/*", kAll, Encoding::f32},
        Case{"*/*, application/x-larql-ffn-i8", kAll, Encoding::i8},
        Case{"*/*;q=0.9, application/x-larql-ffn-f16;q=0.5", kAll, Encoding::f32},
        // Specificity: a named entry's q beats the wildcard's, including q=0.
        Case{"*/*, application/x-larql-ffn;q=0", kAll, Encoding::f16},
        Case{"*/*, application/x-larql-ffn;q=0, application/x-larql-ffn-f16;q=0", kAll, Encoding::q8},
        Case{"*/*, application/x-larql-ffn;q=0, application/x-larql-ffn-f16;q=0, application/x-larql-ffn-q8;q=0", kAll,
             Encoding::i8},
        Case{"*/*, application/x-larql-ffn;q=0, application/x-larql-ffn-f16;q=0", kNoI8, Encoding::f32},
        Case{"application/*;q=0.2, */*;q=0.9, application/x-larql-ffn;q=0.1", kAll, Encoding::f16},
        // q=0 means not acceptable.
        Case{"application/x-larql-ffn-f16;q=0, application/x-larql-ffn;q=0.1", kAll, Encoding::f32},
        Case{"application/x-larql-ffn-i8;q=0", kAll, Encoding::f32},
        // i8 not enabled: skipped, not chosen.
        Case{"application/x-larql-ffn-i8", kNoI8, Encoding::f32},
        Case{"application/x-larql-ffn-i8, application/x-larql-ffn-f16;q=0.1", kNoI8, Encoding::f16},
        // q8 (§11): our client's headers, with and without f16; not offered → the next rung.
        Case{"application/x-larql-ffn-q8, application/x-larql-ffn-f16;q=0.5, application/x-larql-ffn;q=0.25", kDefault,
             Encoding::q8},
        Case{"application/x-larql-ffn-q8, application/x-larql-ffn-f16;q=0.5, application/x-larql-ffn;q=0.25", kNoI8,
             Encoding::f16},
        Case{"application/x-larql-ffn-q8, application/x-larql-ffn;q=0.5", kNoI8, Encoding::f32},
        Case{"application/x-larql-ffn-q8", kDefault, Encoding::q8},
        // Wildcard order among the unnamed: f32 > f16 > q8 > i8; the reference client never gets q8.
        Case{"*/*, application/x-larql-ffn;q=0.5, application/x-larql-ffn-f16;q=0.5", kAll, Encoding::q8},
        Case{kReferenceClient, kDefault, Encoding::f16},
        Case{"application/x-larql-ffn-i8;q=0.9, application/x-larql-ffn-q8;q=0.9", kAll, Encoding::i8},
        Case{"application/x-larql-ffn-i8;q=0.8, application/x-larql-ffn-q8;q=0.9", kAll, Encoding::q8},
        // Syntax: case, whitespace, other parameters, quoted strings, empty elements.
        Case{"APPLICATION/X-LARQL-FFN-F16", kAll, Encoding::f16},
        Case{"  application/x-larql-ffn-f16 ; Q=0.7 ,\tapplication/x-larql-ffn ;q=0.6", kAll, Encoding::f16},
        Case{"application/x-larql-ffn-f16;charset=\"a,b;q=0\";q=1, application/x-larql-ffn;q=0.9", kAll, Encoding::f16},
        Case{", ,application/x-larql-ffn-i8,", kAll, Encoding::i8},
        Case{"application/x-larql-ffn-f16;q=0.9;ext=1, application/x-larql-ffn;q=0.8", kAll, Encoding::f16},
        // Malformed elements are skipped, the rest still counts.
        Case{"application/x-larql-ffn-f16;q=2, application/x-larql-ffn-i8;q=0.3", kAll, Encoding::i8},
        Case{"application/x-larql-ffn-f16;q=abc", kAll, Encoding::f32},
        Case{"application/x-larql-ffn-f16;q=1.5", kAll, Encoding::f32},
        Case{"application/x-larql-ffn-f16;q=0.1234", kAll, Encoding::f32},
        Case{"garbage, application/x-larql-ffn-f16", kAll, Encoding::f16},
        Case{"*/x-larql-ffn-f16", kAll, Encoding::f32}));

TEST(AcceptParse, QValuesInThousandths) {
  auto ranges = parse_accept("a/b;q=0.5, c/d, e/f;q=1.000, g/h;q=0.05");
  ASSERT_EQ(ranges.size(), 4u);
  EXPECT_EQ(ranges[0].q_millis, 500);
  EXPECT_EQ(ranges[1].q_millis, 1000);
  EXPECT_EQ(ranges[2].q_millis, 1000);
  EXPECT_EQ(ranges[3].q_millis, 50);
  EXPECT_EQ(ranges[3].type, "g");
  EXPECT_EQ(ranges[3].subtype, "h");
}

TEST(ContentType, ParsesCaseAndParameters) {
  EXPECT_EQ(body_type_from_content_type("application/x-larql-ffn").binary, Encoding::f32);
  EXPECT_EQ(body_type_from_content_type("Application/X-Larql-Ffn-F16").binary, Encoding::f16);
  EXPECT_EQ(body_type_from_content_type(" application/x-larql-ffn-i8 ; v=1").binary, Encoding::i8);
  EXPECT_EQ(body_type_from_content_type("application/X-LARQL-FFN-Q8").binary, Encoding::q8);
  const BodyType json = body_type_from_content_type("application/json; charset=utf-8");
  EXPECT_TRUE(json.json);
  EXPECT_FALSE(json.binary);
  for (const char* unknown : {"application/x-larql-ffn-f16x", "", "application/x-larql-ffn-q4"}) {
    const BodyType t = body_type_from_content_type(unknown);
    EXPECT_FALSE(t.json || t.binary) << unknown;
  }
  for (const EncodingInfo& info : kEncodings) {
    EXPECT_EQ(body_type_from_content_type(content_type(info.encoding)).binary, info.encoding);
    EXPECT_EQ(encoding_from_name(info.name), info.encoding);
  }
  EXPECT_EQ(encoding_from_name("q4"), std::nullopt);
  EXPECT_EQ(encoding_names(), "f32, f16, q8 or i8");
}

TEST(EncodingSet, InsertEraseContains) {
  EncodingSet s{Encoding::f16};
  EXPECT_TRUE(s.contains(Encoding::f16));
  EXPECT_FALSE(s.contains(Encoding::q8));
  s.insert(Encoding::q8);
  s.erase(Encoding::f16);
  EXPECT_EQ(s, EncodingSet{Encoding::q8});
}

}  // namespace
}  // namespace larql::wire
