// PROTOCOL §12's /v1/walk-experts messages: the spec's byte vectors, round trips in every
// encoding, framing errors that never trust a length, §12's assignment rules, the
// summation order, and splitting by expert range.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "support/hex.h"
#include "wire/expert_codec.h"

namespace larql::wire {
namespace {

const std::string kRequestVector = test::from_hex(
    "03000000 02000000 01000000 03000000"
    "00000000 05000000 0000403f  00000000 09000000 0000803e  01000000 09000000 0000803f"
    "0000803f 000000c0 0000003f 00000000 00000000 00000000 0000803f 0000803f");

const std::string kExpertRowsVector = test::from_hex(
    "03000000 03000000 0000c03f"
    "0000803f 00000000 00000000 00000000  00000000 0000803f 00000000 00000000"
    "0000003f 0000003f 0000003f 0000003f");

const std::vector<ExpertAssignment> kVectorAssignments{{0, 5, 0.75f}, {0, 9, 0.25f}, {1, 9, 1.0f}};

TEST(ExpertCodec, EncodesTheSpecsRequestVector) {
  std::string out;
  const std::vector<float> rows{1, -2, 0.5f, 0, 0, 0, 1, 1};
  auto enc = encode_expert_request(Encoding::f32, 3, 2, false, kVectorAssignments, 4, rows, out);
  ASSERT_TRUE(enc.ok()) << enc.error().message;
  EXPECT_EQ(test::to_hex(out), test::to_hex(kRequestVector));
}

TEST(ExpertCodec, ParsesTheSpecsRequestVector) {
  auto view = parse_expert_request(as_bytes(kRequestVector), Encoding::f32, 4);
  ASSERT_TRUE(view.ok()) << view.error().message;
  EXPECT_EQ(view->layer, 3u);
  EXPECT_EQ(view->rows, 2u);
  EXPECT_FALSE(view->expert_rows());
  EXPECT_EQ(view->assignments, kVectorAssignments);
  std::vector<float> x(8);
  ASSERT_TRUE(decode_values(Encoding::f32, view->values, 2, 4, x).ok());
  EXPECT_EQ(x, (std::vector<float>{1, -2, 0.5f, 0, 0, 0, 1, 1}));
  EXPECT_TRUE(check_assignments(view->assignments, view->rows, 16).ok());
}

TEST(ExpertCodec, EncodesAndParsesTheSpecsPerExpertRowsVector) {
  std::string out;
  const std::vector<float> rows{1, 0, 0, 0, 0, 1, 0, 0, 0.5f, 0.5f, 0.5f, 0.5f};
  ASSERT_TRUE(encode_expert_rows_response(Encoding::f32, 3, 3, 4, rows, 1.5f, out).ok());
  EXPECT_EQ(test::to_hex(out), test::to_hex(kExpertRowsVector));
  auto view = parse_expert_rows_response(as_bytes(kExpertRowsVector), Encoding::f32, 4);
  ASSERT_TRUE(view.ok()) << view.error().message;
  EXPECT_EQ(view->layer, 3u);
  EXPECT_EQ(view->n, 3u);
  EXPECT_EQ(view->latency_ms, 1.5f);
  std::string spliced;
  write_expert_rows_response(view->layer, view->n, view->latency_ms, view->values, spliced);
  EXPECT_EQ(spliced, kExpertRowsVector);
}

TEST(ExpertCodec, RoundTripsEveryEncoding) {
  const size_t H = 64;
  std::vector<float> x(3 * H);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(float(i)) * 3;
  const std::vector<ExpertAssignment> a{{0, 1, 0.5f}, {1, 0, 1}, {2, 1, 0.25f}, {2, 7, 0.75f}};
  for (Encoding e : {Encoding::f32, Encoding::f16, Encoding::q8, Encoding::i8}) {
    std::string out;
    auto enc = encode_expert_request(e, 7, 3, true, a, H, x, out);
    ASSERT_TRUE(enc.ok()) << encoding_name(e);
    EXPECT_EQ(enc->encoding, e);
    auto view = parse_expert_request(as_bytes(out), e, H);
    ASSERT_TRUE(view.ok()) << view.error().message;
    EXPECT_TRUE(view->expert_rows());
    EXPECT_EQ(view->assignments, a);
    std::vector<float> back(x.size());
    ASSERT_TRUE(decode_values(e, view->values, 3, H, back).ok());
    for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(back[i], x[i], e == Encoding::f32 ? 0 : 0.05) << encoding_name(e);
  }
}

TEST(ExpertCodec, F16RowsThatWouldOverflowGoAsF32) {
  std::vector<float> rows(8, 1.0f);
  rows[5] = 1e6f;
  std::string out;
  auto enc = encode_expert_rows_response(Encoding::f16, 0, 2, 4, rows, 0, out);
  ASSERT_TRUE(enc.ok());
  EXPECT_EQ(enc->encoding, Encoding::f32);
  EXPECT_TRUE(enc->fell_back);
  rows[5] = std::numeric_limits<float>::infinity();
  EXPECT_EQ(encode_expert_rows_response(Encoding::f16, 0, 2, 4, rows, 0, out).error().code, ErrorCode::non_finite_output);
}

TEST(ExpertCodec, FramingErrorsNameWhatWasWrong) {
  auto code = [](const std::string& body) {
    auto v = parse_expert_request(as_bytes(body), Encoding::f32, 4);
    return v ? std::string("ok") : std::string(error_code_name(v.error().code));
  };
  EXPECT_EQ(code(kRequestVector.substr(0, 15)), "truncated");
  // n = 2^32-1 assignments in a short body: truncated, not an allocation.
  EXPECT_EQ(code(test::from_hex("03000000 02000000 01000000 ffffffff 00000000")), "truncated");
  EXPECT_EQ(code(kRequestVector.substr(0, kRequestVector.size() - 4)), "truncated");
  EXPECT_EQ(code(kRequestVector + "x"), "bad_length");
  std::string zero_rows = kRequestVector;
  zero_rows[4] = 0;
  EXPECT_EQ(code(zero_rows), "bad_seq_len");
  std::string no_full_output = kRequestVector;
  no_full_output[8] = 2;
  EXPECT_EQ(code(no_full_output), "full_output_required");
  auto rows = parse_expert_rows_response(as_bytes(kExpertRowsVector.substr(0, 20)), Encoding::f32, 4);
  EXPECT_EQ(rows.error().code, ErrorCode::truncated);
}

TEST(ExpertCodec, AssignmentRulesAreChecked) {
  auto why = [](std::vector<ExpertAssignment> a, uint32_t rows = 2) {
    auto s = check_assignments(a, rows, 10);
    return s ? std::string("ok") : s.error().message;
  };
  EXPECT_EQ(why({{0, 1, 1}, {0, 3, 1}, {1, 0, 1}}), "ok");
  EXPECT_NE(why({}).find("no assignments"), std::string::npos);
  EXPECT_NE(why({{0, 3, 1}, {0, 1, 1}, {1, 0, 1}}).find("sorted"), std::string::npos);
  EXPECT_NE(why({{0, 1, 1}, {1, 0, 1}, {0, 2, 1}}).find("sorted"), std::string::npos);
  EXPECT_NE(why({{0, 1, 1}, {0, 1, 1}, {1, 0, 1}}).find("repeats"), std::string::npos);
  EXPECT_NE(why({{0, 1, 1}}).find("row 1 has no assignment"), std::string::npos);
  EXPECT_NE(why({{1, 1, 1}}).find("row 0 has no assignment"), std::string::npos);
  EXPECT_NE(why({{0, 1, 1}, {2, 1, 1}}).find("names row 2"), std::string::npos);
  EXPECT_NE(why({{0, 10, 1}, {1, 1, 1}}).find("experts 0-9"), std::string::npos);
  EXPECT_NE(why({{0, 1, std::nanf("")}, {1, 1, 1}}).find("non-finite weight"), std::string::npos);
  EXPECT_EQ(check_assignments(std::vector<ExpertAssignment>{}, 1, 10).error().code, ErrorCode::bad_assignment);
}

TEST(ExpertCodec, SumsEachRowsExpertsInAssignmentOrderStartingFromTheFirstTerm) {
  const std::vector<ExpertAssignment> a{{0, 2, 0.1f}, {0, 5, 0.7f}, {1, 5, 3.0f}};
  const std::vector<float> rows{1e8f, 1, 1e8f, 1, 3, 5};  // hidden 2
  std::vector<float> out(4, 42);
  sum_expert_rows(a, rows.data(), 2, out.data());
  volatile float p0 = 0.1f * 1e8f, p1 = 0.7f * 1e8f;  // each product rounded, then added
  EXPECT_EQ(out[0], float(p0 + p1));
  EXPECT_EQ(out[1], 0.1f * 1.0f + 0.7f * 1.0f);
  EXPECT_EQ(out[2], 9.0f);
  EXPECT_EQ(out[3], 15.0f);
}

TEST(ExpertCodec, TakesAnExpertRangeWithItsRowsRenumbered) {
  const std::vector<ExpertAssignment> a{{0, 1, 0.5f}, {0, 6, 0.5f}, {1, 2, 1}, {2, 7, 0.3f}, {2, 9, 0.7f}};
  const ExpertPart low = take_expert_range(a, 0, 4), high = take_expert_range(a, 5, 9);
  EXPECT_EQ(low.rows, (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(low.assignments, (std::vector<ExpertAssignment>{{0, 1, 0.5f}, {1, 2, 1}}));
  EXPECT_EQ(low.sources, (std::vector<uint32_t>{0, 2}));
  EXPECT_EQ(high.rows, (std::vector<uint32_t>{0, 2}));
  EXPECT_EQ(high.assignments, (std::vector<ExpertAssignment>{{0, 6, 0.5f}, {1, 7, 0.3f}, {1, 9, 0.7f}}));
  EXPECT_EQ(high.sources, (std::vector<uint32_t>{1, 3, 4}));
  EXPECT_TRUE(check_assignments(high.assignments, uint32_t(high.rows.size()), 10).ok());
  EXPECT_TRUE(take_expert_range(a, 3, 5).rows.empty());
}

}  // namespace
}  // namespace larql::wire
