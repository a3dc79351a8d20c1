// PROTOCOL §9's split and splice without sockets (net/range_split.h): a request cut by the
// ranges that own its layers, and the ranges' answers, made here in memory, put back
// together in request order.
#include "net/range_split.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "wire/codec.h"
#include "wire/json_codec.h"

namespace larql {
namespace {

using wire::Encoding;

constexpr size_t kHidden = 64;  // a multiple of 32, so q8 applies
constexpr uint32_t kPositions = 3;

// Ranges 0-2 (index 0) and 3-5 (index 1).
std::optional<LayerOwner> owner_of(uint32_t layer) {
  if (layer <= 2) return LayerOwner{0, {0, 2}};
  if (layer <= 5) return LayerOwner{1, {3, 5}};
  return std::nullopt;
}

// Values that differ by layer, position and coordinate, all representable in f16.
std::vector<float> values_for(uint32_t layer) {
  std::vector<float> v(kPositions * kHidden);
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(int(i % 97) - 48) / 16.0f + float(layer);
  return v;
}

std::string request_body(Encoding encoding, const std::vector<uint32_t>& layers) {
  std::string body;
  const auto x = values_for(100);
  EXPECT_TRUE(wire::encode_request(encoding, {.layers = layers, .seq_len = kPositions}, kHidden, x, body).ok());
  return body;
}

// What a shard owning exactly `layers` answers, in `encoding`.
std::string answer_body(Encoding encoding, const std::vector<uint32_t>& layers, float latency_ms) {
  std::vector<std::vector<float>> values;
  std::vector<wire::ResponseRecord> records;
  for (uint32_t l : layers) values.push_back(values_for(l));
  for (size_t i = 0; i < layers.size(); ++i) records.push_back({layers[i], values[i]});
  std::string body;
  EXPECT_TRUE(wire::encode_response(encoding, records, kPositions, kHidden, latency_ms, body).ok());
  return body;
}

std::string content_type_of(Encoding e) { return std::string(wire::content_type(e)); }

TEST(RangeSplit, LayersAreGroupedByOwnerInTheOrderTheyAppear) {
  auto parts = split_by_range({4, 1, 5, 0}, owner_of, "0-2, 3-5");
  ASSERT_TRUE(parts.ok()) << parts.error().message;
  ASSERT_EQ(parts->size(), 2u);
  EXPECT_EQ((*parts)[0].owner.index, 1u);
  EXPECT_EQ((*parts)[0].layers, (std::vector<uint32_t>{4, 5}));
  EXPECT_EQ((*parts)[0].positions, (std::vector<size_t>{0, 2}));
  EXPECT_EQ((*parts)[1].owner.index, 0u);
  EXPECT_EQ((*parts)[1].owner.extent.str(), "0-2");
  EXPECT_EQ((*parts)[1].layers, (std::vector<uint32_t>{1, 0}));
  EXPECT_EQ((*parts)[1].positions, (std::vector<size_t>{1, 3}));

  auto uncovered = split_by_range({1, 9}, owner_of, "0-2, 3-5");
  ASSERT_FALSE(uncovered.ok());
  EXPECT_EQ(uncovered.error().code, ErrorCode::no_owning_shard);
  EXPECT_EQ(uncovered.error().message, "layer 9 is not covered by any shard range (covered: 0-2, 3-5)");
}

TEST(RangeSplit, RequestsAreReadAndCheckedBeforeAnyShardIsAsked) {
  auto unknown = read_walk_request("x", "text/plain", kHidden);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().code, ErrorCode::unsupported_media_type);
  EXPECT_NE(unknown.error().message.find("'text/plain'"), std::string::npos) << unknown.error().message;

  auto twice = read_walk_request(request_body(Encoding::f32, {1, 4, 1}), content_type_of(Encoding::f32), kHidden);
  ASSERT_FALSE(twice.ok());
  EXPECT_EQ(twice.error().code, ErrorCode::duplicate_layer);

  std::string cut = request_body(Encoding::f16, {1, 4});
  cut.resize(cut.size() - 1);
  auto truncated = read_walk_request(cut, content_type_of(Encoding::f16), kHidden);
  ASSERT_FALSE(truncated.ok());
  EXPECT_NE(truncated.error().code, ErrorCode::unsupported_media_type);

  auto json = read_walk_request(wire::encode_json_request(std::vector<uint32_t>{0, 3}, kPositions, values_for(100)),
                                "application/json", kHidden);
  ASSERT_TRUE(json.ok()) << json.error().message;
  EXPECT_FALSE(json->encoding);
  EXPECT_EQ(json->layers(), (std::vector<uint32_t>{0, 3}));
}

TEST(RangeSplit, EachPartCarriesTheRequestsValuesUntouched) {
  for (Encoding e : {Encoding::f32, Encoding::f16, Encoding::q8, Encoding::i8}) {
    SCOPED_TRACE(wire::encoding_name(e));
    const std::string body = request_body(e, {4, 1, 5});
    auto request = read_walk_request(body, content_type_of(e), kHidden);
    ASSERT_TRUE(request.ok()) << request.error().message;
    auto parts = split_by_range(request->layers(), owner_of, "");
    ASSERT_TRUE(parts.ok());
    for (const RangePart& part : *parts) {
      const std::string sent = part_body(*request, part);
      auto view = wire::parse_request(wire::as_bytes(sent), e, kHidden);
      ASSERT_TRUE(view.ok()) << view.error().message;
      EXPECT_EQ(view->header.layers, part.layers);
      EXPECT_EQ(view->header.batch, part.layers.size() > 1) << "one layer goes in the single layout";
      EXPECT_EQ(view->header.seq_len, kPositions);
      EXPECT_TRUE(std::equal(view->values.begin(), view->values.end(), request->binary->values.begin(),
                             request->binary->values.end()));
    }
  }
  const auto x = values_for(100);
  const std::string json_body = wire::encode_json_request(std::vector<uint32_t>{4, 1}, kPositions, x);
  auto request = read_walk_request(json_body, "application/json", kHidden);
  ASSERT_TRUE(request.ok());
  auto parts = split_by_range(request->layers(), owner_of, "");
  ASSERT_TRUE(parts.ok());
  auto sent = wire::parse_json_request(part_body(*request, (*parts)[1]), kHidden);
  ASSERT_TRUE(sent.ok());
  EXPECT_EQ(sent->layers, (std::vector<uint32_t>{1}));
  EXPECT_EQ(sent->seq_len, kPositions);
  EXPECT_EQ(sent->residual, x);
}

// A request for layers {4, 1, 5, 0}: range 3-5 answers {4, 5}, range 0-2 answers {1, 0}.
struct Split {
  std::string body;
  WalkRequest request;
  std::vector<RangePart> parts;
};
Split split(Encoding e) {
  Split s{request_body(e, {4, 1, 5, 0}), {}, {}};
  auto request = read_walk_request(s.body, content_type_of(e), kHidden);
  EXPECT_TRUE(request.ok());
  s.request = std::move(*request);
  s.parts = std::move(*split_by_range(s.request.layers(), owner_of, ""));
  return s;
}

TEST(RangeSplit, AnswersInOneEncodingAreSplicedByteForByte) {
  for (Encoding e : {Encoding::f32, Encoding::f16, Encoding::q8, Encoding::i8}) {
    SCOPED_TRACE(wire::encoding_name(e));
    const Split s = split(e);
    const std::vector<PartAnswer> answers{{"http://b", content_type_of(e), answer_body(e, {4, 5}, 2.5f)},
                                          {"http://a", content_type_of(e), answer_body(e, {1, 0}, 4.0f)}};
    auto spliced = splice_answers(s.request, s.parts, answers, kHidden);
    ASSERT_TRUE(spliced.ok()) << spliced.error().message;
    EXPECT_EQ(spliced->content_type, content_type_of(e));
    EXPECT_FALSE(spliced->reencoded_f32);
    // What one shard owning every layer would have sent, the slower part's latency.
    EXPECT_EQ(spliced->body, answer_body(e, {4, 1, 5, 0}, 4.0f));
  }
}

TEST(RangeSplit, MixedEncodingsAreReencodedAsF32) {
  const Split s = split(Encoding::f32);
  const std::vector<PartAnswer> answers{{"http://b", content_type_of(Encoding::f16), answer_body(Encoding::f16, {4, 5}, 1)},
                                        {"http://a", content_type_of(Encoding::f32), answer_body(Encoding::f32, {1, 0}, 1)}};
  auto spliced = splice_answers(s.request, s.parts, answers, kHidden);
  ASSERT_TRUE(spliced.ok()) << spliced.error().message;
  EXPECT_TRUE(spliced->reencoded_f32);
  EXPECT_EQ(spliced->content_type, content_type_of(Encoding::f32));
  // The test's values are exact in f16, so the whole answer is the f32 one of every layer.
  EXPECT_EQ(spliced->body, answer_body(Encoding::f32, {4, 1, 5, 0}, 1));
}

TEST(RangeSplit, JsonAnswersAreSplicedInRequestOrder) {
  const std::string body = wire::encode_json_request(std::vector<uint32_t>{4, 1, 5, 0}, kPositions, values_for(100));
  auto request = read_walk_request(body, "application/json", kHidden);
  ASSERT_TRUE(request.ok());
  auto parts = split_by_range(request->layers(), owner_of, "");
  ASSERT_TRUE(parts.ok());
  auto json_answer = [](const std::vector<uint32_t>& layers, float latency) {
    std::vector<std::vector<float>> values;
    std::vector<wire::ResponseRecord> records;
    for (uint32_t l : layers) values.push_back(values_for(l));
    for (size_t i = 0; i < layers.size(); ++i) records.push_back({layers[i], values[i]});
    return *wire::encode_json_response(records, kPositions, latency);
  };
  const std::vector<PartAnswer> answers{{"http://b", "application/json", json_answer({4, 5}, 3)},
                                        {"http://a", "application/json", json_answer({1, 0}, 2)}};
  auto spliced = splice_answers(*request, *parts, answers, kHidden);
  ASSERT_TRUE(spliced.ok()) << spliced.error().message;
  EXPECT_EQ(spliced->content_type, "application/json");
  EXPECT_EQ(spliced->body, json_answer({4, 1, 5, 0}, 3));
}

TEST(RangeSplit, AnAnswerThatDoesNotFitIsRefusedNamingItsShard) {
  const Split s = split(Encoding::f16);
  const std::string good = answer_body(Encoding::f16, {1, 0}, 1), f16 = content_type_of(Encoding::f16);
  auto refusal = [&](PartAnswer bad) {
    auto spliced = splice_answers(s.request, s.parts, {std::move(bad), {"http://a", f16, good}}, kHidden);
    EXPECT_FALSE(spliced.ok());
    if (spliced.ok()) return std::string();
    EXPECT_EQ(spliced.error().code, ErrorCode::shard_unavailable);
    EXPECT_EQ(spliced.error().message.rfind("shard http://b (layers 3-5) answered ", 0), 0u) << spliced.error().message;
    return spliced.error().message;
  };
  EXPECT_NE(refusal({"http://b", f16, "this is not an FFN response"}).find("malformed"), std::string::npos);
  EXPECT_NE(refusal({"http://b", "text/html", good}).find("Content-Type 'text/html'"), std::string::npos);
  EXPECT_NE(refusal({"http://b", f16, answer_body(Encoding::f16, {5, 4}, 1)}).find("layer 5 where layer 4 was asked"),
            std::string::npos);
  EXPECT_NE(refusal({"http://b", f16, answer_body(Encoding::f16, {4}, 1)}).find("1 layers where 2 were asked"),
            std::string::npos);
  // Records for other positions than the request's.
  std::vector<float> one(kHidden, 1.0f);
  std::string short_answer;
  const std::vector<wire::ResponseRecord> records{{4, one}, {5, one}};
  ASSERT_TRUE(wire::encode_response(Encoding::f16, records, 1, kHidden, 1, short_answer).ok());
  EXPECT_NE(refusal({"http://b", f16, short_answer}).find("1 positions for layer 4 where the request has 3"),
            std::string::npos);
}

}  // namespace
}  // namespace larql
