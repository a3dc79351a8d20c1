// The JSON variant of PROTOCOL §5: shapes, defaults and the errors of §7.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <vector>

#include "wire/json_codec.h"

namespace larql::wire {
namespace {

ErrorCode request_error(const std::string& body, size_t hidden = 2) {
  auto r = parse_json_request(body, hidden);
  EXPECT_FALSE(r.ok()) << body;
  return r.ok() ? ErrorCode::internal : r.error().code;
}

TEST(JsonCodec, SingleLayerDefaultsSeqLenToOne) {
  auto r = parse_json_request(R"({"layer": 3, "residual": [1.5, -2], "full_output": true})", 2);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->layers, std::vector<uint32_t>{3});
  EXPECT_EQ(r->seq_len, 1u);
  EXPECT_EQ(r->residual, (std::vector<float>{1.5f, -2.0f}));
}

TEST(JsonCodec, LayersWinsOverLayer) {
  auto r = parse_json_request(R"({"layer": 9, "layers": [1, 2], "seq_len": 2, "residual": [1,2,3,4], "full_output": true})", 2);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->layers, (std::vector<uint32_t>{1, 2}));
  EXPECT_EQ(r->seq_len, 2u);
}

TEST(JsonCodec, RequestRoundTrip) {
  const std::vector<uint32_t> layers{4, 5};
  const std::vector<float> residual{0.1f, -3e-20f, 65536.5f, 1e30f};
  auto r = parse_json_request(encode_json_request(layers, 2, residual), 2);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->layers, layers);
  EXPECT_EQ(r->residual, residual);  // floats survive the double text form exactly
}

TEST(JsonCodec, Errors) {
  EXPECT_EQ(request_error("{not json"), ErrorCode::invalid_json);
  EXPECT_EQ(request_error("[1,2]"), ErrorCode::invalid_json);
  EXPECT_EQ(request_error(R"({"residual": [1,2], "full_output": true})"), ErrorCode::invalid_json);
  EXPECT_EQ(request_error(R"({"layer": -1, "residual": [1,2], "full_output": true})"), ErrorCode::invalid_json);
  EXPECT_EQ(request_error(R"({"layer": 1.5, "residual": [1,2], "full_output": true})"), ErrorCode::invalid_json);
  EXPECT_EQ(request_error(R"({"layer": 4294967296, "residual": [1,2], "full_output": true})"), ErrorCode::invalid_json);
  EXPECT_EQ(request_error(R"({"layers": [], "residual": [1,2], "full_output": true})"), ErrorCode::bad_layer_count);
  EXPECT_EQ(request_error(R"({"layer": 1, "residual": [1,2]})"), ErrorCode::full_output_required);
  EXPECT_EQ(request_error(R"({"layer": 1, "residual": [1,2], "full_output": false})"), ErrorCode::full_output_required);
  EXPECT_EQ(request_error(R"({"layer": 1, "residual": [1,2], "full_output": "yes"})"), ErrorCode::full_output_required);
  EXPECT_EQ(request_error(R"({"layer": 1, "seq_len": 0, "residual": [], "full_output": true})"), ErrorCode::bad_seq_len);
  EXPECT_EQ(request_error(R"({"layer": 1, "residual": [1,2,3], "full_output": true})"), ErrorCode::bad_length);
  EXPECT_EQ(request_error(R"({"layer": 1, "residual": [1,"x"], "full_output": true})"), ErrorCode::invalid_json);
  EXPECT_EQ(request_error(R"({"layer": 1, "residual": [1,1e39], "full_output": true})"), ErrorCode::non_finite_input);
  // Beyond double range the JSON parser itself refuses the number.
  EXPECT_EQ(request_error(R"({"layer": 1, "residual": [1,1e999], "full_output": true})"), ErrorCode::invalid_json);
}

TEST(JsonCodec, BadLengthMessageNamesShape) {
  auto r = parse_json_request(R"({"layer": 1, "seq_len": 2, "residual": [1,2,3], "full_output": true})", 64);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "residual has 3 values, expected 128 (seq_len=2 × hidden=64)");
}

TEST(JsonCodec, ResponseShapes) {
  const std::vector<float> a{1, 2}, b{3, 4};
  const ResponseRecord one[] = {{7, a}};
  auto single = encode_json_response(one, 1, 0.5f);
  ASSERT_TRUE(single.ok());
  auto doc = nlohmann::json::parse(*single);
  EXPECT_EQ(doc["layer"], 7);
  EXPECT_EQ(doc["seq_len"], 1);
  EXPECT_EQ(doc["latency_ms"], 0.5);
  EXPECT_EQ(doc["output"].size(), 2u);
  EXPECT_FALSE(doc.contains("results"));

  const ResponseRecord two[] = {{7, a}, {2, b}};
  auto batch = encode_json_response(two, 1, 0.5f);
  ASSERT_TRUE(batch.ok());
  auto parsed = parse_json_response(*batch, 2);
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  ASSERT_EQ(parsed->records.size(), 2u);
  EXPECT_EQ(parsed->records[1].layer, 2u);
  EXPECT_EQ(parsed->records[1].output, b);
  EXPECT_EQ(parsed->latency_ms, 0.5f);

  // A latency beyond f32's range would be written back as null by whoever passes it on.
  auto huge = parse_json_response(R"({"latency_ms": 1e39, "layer": 7, "seq_len": 1, "output": [1, 2]})", 2);
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.error().code, ErrorCode::non_finite_input);
  EXPECT_EQ(huge.error().message, "response latency_ms 1e+39 is not a finite f32");

  const std::vector<float> bad{1, NAN};
  const ResponseRecord nan_rec[] = {{3, bad}};
  auto refused = encode_json_response(nan_rec, 1, 0.5f);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::non_finite_output);
}

}  // namespace
}  // namespace larql::wire
