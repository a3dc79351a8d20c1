// The one parser of a shard's /v1/stats (net/shard_stats.h): every field of PROTOCOL §8
// read, the optional ones left out when absent, and a field of the wrong kind refused with
// its name, never thrown.
#include "net/shard_stats.h"

#include <gtest/gtest.h>

namespace larql {
namespace {

TEST(ShardStats, ReadsEveryField) {
  auto s = parse_shard_stats(R"({"ffn_arithmetic":"bf16-dot","model":"demo","family":"llama","hidden_size":384,
    "num_layers":6,"layers":{"start":2,"end":4},"mode":"ffn-service","max_body_bytes":1048576,"max_work":4096,
    "wire":{"request":["f32","f16","q9"],"response":["f32"]},"layer_fingerprints":{"2":"ab","3":"cd","4":"ef"}})");
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->hidden, 384u);
  EXPECT_EQ(s->num_layers, 6u);
  EXPECT_EQ(s->model, "demo");
  EXPECT_EQ(s->family, "llama");
  EXPECT_EQ(s->ffn_arithmetic, "bf16-dot");
  ASSERT_TRUE(s->layers);
  EXPECT_EQ(s->layers->str(), "2-4");
  EXPECT_EQ(s->max_body_bytes, 1048576u);
  EXPECT_EQ(s->max_work, 4096u);
  EXPECT_EQ(s->request_encodings, (std::vector<std::string>{"f32", "f16", "q9"}));  // names as listed
  EXPECT_EQ(s->response_encodings, (std::vector<std::string>{"f32"}));
  EXPECT_EQ(s->mode, "ffn-service");
  ASSERT_TRUE(s->fingerprints);
  EXPECT_EQ(s->fingerprints->size(), 3u);
  EXPECT_EQ(s->fingerprints->at(3), "cd");
}

TEST(ShardStats, AReferenceServerNeedsOnlyHiddenSize) {
  auto s = parse_shard_stats(R"({"hidden_size":2560})");
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->hidden, 2560u);
  EXPECT_EQ(s->ffn_arithmetic, "f32");
  EXPECT_FALSE(s->layers);
  EXPECT_FALSE(s->fingerprints);
  EXPECT_FALSE(s->request_encodings);
  EXPECT_FALSE(s->response_encodings);
  EXPECT_EQ(s->mode, "");
  EXPECT_FALSE(s->max_body_bytes);
  EXPECT_FALSE(s->max_work);
}

TEST(ShardStats, AFieldOfTheWrongKindIsNamed) {
  const std::pair<const char*, const char*> cases[] = {
      {"not json", "not a JSON object"},
      {"[384]", "not a JSON object"},
      {R"({"model":"demo"})", "no hidden_size"},
      {R"({"hidden_size":0})", "no hidden_size"},
      {R"({"hidden_size":"384"})", "hidden_size"},
      {R"({"hidden_size":-384})", "hidden_size"},
      {R"({"hidden_size":384,"num_layers":"six"})", "num_layers"},
      {R"({"hidden_size":384,"model":7})", "model"},
      {R"({"hidden_size":384,"ffn_arithmetic":["f32"]})", "ffn_arithmetic"},
      {R"({"hidden_size":384,"layers":"0-5"})", "layers"},
      {R"({"hidden_size":384,"layers":{"start":"0","end":5}})", "start"},
      {R"({"hidden_size":384,"layers":{"start":5,"end":2}})", "start ≤ end"},
      {R"({"hidden_size":384,"layers":{"start":0,"end":9999999999}})", "start ≤ end"},
      {R"({"hidden_size":384,"layer_fingerprints":["ab"]})", "layer_fingerprints"},
      {R"({"hidden_size":384,"layer_fingerprints":{"x":"ab"}})", "layer_fingerprints"},
      {R"({"hidden_size":384,"layer_fingerprints":{"1":5}})", "layer_fingerprints"},
      {R"({"hidden_size":384,"wire":{"request":"f16"}})", "wire.request"},
      {R"({"hidden_size":384,"wire":{"response":{"f16":1}}})", "wire.response"},
      {R"({"hidden_size":384,"mode":5})", "mode"},
      {R"({"hidden_size":384,"max_body_bytes":-1})", "max_body_bytes"},
      {R"({"hidden_size":384,"max_work":1.5})", "max_work"},
  };
  for (const auto& [body, names] : cases) {
    auto s = parse_shard_stats(body);
    ASSERT_FALSE(s.ok()) << body;
    EXPECT_EQ(s.error().code, ErrorCode::shard_unavailable) << body;
    EXPECT_NE(s.error().message.find(names), std::string::npos) << body << ": " << s.error().message;
  }
}

}  // namespace
}  // namespace larql
