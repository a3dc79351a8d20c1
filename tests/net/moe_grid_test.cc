// Mixture-of-experts layers over the wire (PROTOCOL §12). In process: /v1/walk-experts'
// errors in §12's order, its two response kinds, /v1/stats' expert fields, a shard that
// owns some experts refusing to route by itself, and concurrent requests of one layer
// merged into one product. With processes: each MoE family's experts split unevenly over
// two shards, measured by `larql bench --local`: per-expert rows in f32 give logits
// bit-identical to local for any split (they rest on MoeFfn's summation order and on
// expert kernels whose rows are independent), weighted sums agree on top-1.
#include <gtest/gtest.h>

#include <algorithm>

#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "base/byte_io.h"
#include "base/f16.h"
#include "infer/local_ffn.h"
#include "kernels/ops.h"
#include "model/loader.h"
#include "net/ffn_service.h"
#include "net/shard_spec.h"
#include "support/command.h"
#include "support/prometheus.h"
#include "support/process.h"
#include "support/reference_fixtures.h"
#include "wire/codec.h"
#include "wire/expert_codec.h"

namespace larql {
namespace {

using nlohmann::json;
using wire::Encoding;

std::string f32_type() { return std::string(wire::content_type(Encoding::f32)); }

class ExpertService : public ::testing::Test {
 protected:
  void SetUp() override {
    auto m = load_model(test::moe_fixture("mixtral").string());
    ASSERT_TRUE(m.ok()) << m.error().message;
    model_ = std::make_unique<Model>(std::move(*m));
    H_ = model_->config.hidden;
    x_.resize(2 * H_);
    for (size_t i = 0; i < x_.size(); ++i) x_[i] = std::cos(float(i) * 0.37f);
  }
  std::string request(uint32_t layer, std::vector<ExpertAssignment> a, bool expert_rows = false, uint32_t rows = 2) {
    std::string body;
    EXPECT_TRUE(wire::encode_expert_request(Encoding::f32, layer, rows, expert_rows, a, H_, {x_.data(), rows * H_}, body).ok());
    return body;
  }
  static std::string code_of(const HttpReply& r) { return json::parse(r.body).value("code", std::string("?")); }

  std::unique_ptr<Model> model_;
  size_t H_ = 0;
  std::vector<float> x_;
};

TEST_F(ExpertService, ErrorsComeInSectionTwelvesOrderWithTheirCodes) {
  ThreadPool pool(1);
  LocalFfn ffn(*model_, pool);
  FfnService service(*model_, ffn, {.layers = {0, 1}, .experts = {0, 1}});
  const std::vector<ExpertAssignment> good{{0, 0, 0.5f}, {0, 1, 0.5f}, {1, 1, 1}};
  auto status = [&](const std::string& body, const std::string& type = f32_type()) {
    const HttpReply r = service.walk_experts(body, type, "");
    return std::to_string(r.status) + " " + (r.status == 200 ? "ok" : code_of(r));
  };
  EXPECT_EQ(status(request(0, good)), "200 ok");
  EXPECT_EQ(status(request(0, good).substr(0, 20)), "400 truncated");
  EXPECT_EQ(status("{}", "application/json"), "415 unsupported_media_type");
  // Each request below breaks every later rule too: the first rule broken is the one answered.
  EXPECT_EQ(status(request(9, {{0, 3, 1}, {0, 3, 1}})), "400 layer_out_of_range");
  EXPECT_EQ(status(request(2, {{0, 3, 1}, {0, 3, 1}})), "400 layer_not_owned");
  EXPECT_EQ(status(request(0, {{1, 3, 1}, {0, 3, 1}})), "400 bad_assignment");
  EXPECT_EQ(status(request(0, {{0, 3, std::nanf("")}, {1, 3, 1}})), "400 bad_assignment");
  EXPECT_EQ(status(request(0, {{0, 1, 1}, {1, 4, 1}})), "400 bad_assignment");  // expert ≥ E
  const HttpReply not_owned = service.walk_experts(request(0, {{0, 1, 1}, {1, 3, 1}}), f32_type(), "");
  EXPECT_EQ(not_owned.status, 400);
  EXPECT_EQ(code_of(not_owned), "expert_not_owned");
  EXPECT_NE(not_owned.body.find("owns experts 0-1"), std::string::npos) << not_owned.body;
  // Routing by itself needs every expert: /v1/walk-ffn on this shard is refused, naming why.
  std::string dense;
  ASSERT_TRUE(wire::encode_request(Encoding::f32, {.layers = {0}, .seq_len = 2}, H_, x_, dense).ok());
  const HttpReply walk = service.walk_ffn(dense, f32_type(), "");
  EXPECT_EQ(code_of(walk), "expert_not_owned") << walk.body;
  const json stats = service.stats();
  EXPECT_EQ(stats["experts"]["count"], 4);
  EXPECT_EQ(stats["experts"]["used"], 2);
  EXPECT_EQ(stats["experts"]["start"], 0);
  EXPECT_EQ(stats["experts"]["end"], 1);
  EXPECT_EQ(stats["routing"], "client");
  EXPECT_EQ(stats["expert_fingerprints"].size(), 2u);
}

TEST_F(ExpertService, NotMoeLayerOnADenseModel) {
  auto demo = load_model(std::string(LARQL_SOURCE_DIR) + "/models/demo");
  ASSERT_TRUE(demo.ok());
  ThreadPool pool(1);
  LocalFfn ffn(*demo, pool);
  FfnService service(*demo, ffn, {.layers = {0, 0}});
  std::string body;
  std::vector<float> x(demo->config.hidden, 0.5f);
  ASSERT_TRUE(wire::encode_expert_request(Encoding::f32, 0, 1, false, std::vector<ExpertAssignment>{{0, 0, 1}},
                                          demo->config.hidden, x, body).ok());
  const HttpReply r = service.walk_experts(body, f32_type(), "");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(code_of(r), "not_moe_layer");
  EXPECT_FALSE(service.stats().contains("experts"));
}

TEST_F(ExpertService, WeightedSumsEqualTheRowsSummedAndTheLocalLayerBitForBit) {
  ThreadPool pool(2);
  LocalFfn ffn(*model_, pool);
  FfnService service(*model_, ffn, {.layers = {0, 2}});
  EXPECT_EQ(service.stats()["routing"], "shard");
  const std::vector<ExpertAssignment> a{{0, 0, 0.3f}, {0, 2, 0.7f}, {1, 1, 0.6f}, {1, 3, 0.4f}};
  const HttpReply sums = service.walk_experts(request(1, a), f32_type(), f32_type());
  const HttpReply rows = service.walk_experts(request(1, a, true), f32_type(), f32_type());
  ASSERT_EQ(sums.status, 200) << sums.body;
  ASSERT_EQ(rows.status, 200) << rows.body;
  auto sums_view = wire::parse_response(wire::as_bytes(sums.body), Encoding::f32, H_);
  auto rows_view = wire::parse_expert_rows_response(wire::as_bytes(rows.body), Encoding::f32, H_);
  ASSERT_TRUE(sums_view.ok() && rows_view.ok());
  std::vector<float> from_sums(2 * H_), from_rows(a.size() * H_), summed(2 * H_), local(2 * H_);
  ASSERT_TRUE(wire::decode_values(Encoding::f32, sums_view->records[0].values, 2, H_, from_sums).ok());
  ASSERT_TRUE(wire::decode_values(Encoding::f32, rows_view->values, a.size(), H_, from_rows).ok());
  wire::sum_expert_rows(a, from_rows.data(), H_, summed.data());
  ASSERT_TRUE(ffn.experts(1, x_, 2, a, local).ok());
  EXPECT_EQ(from_sums, summed);
  EXPECT_EQ(from_sums, local);
}

TEST_F(ExpertService, ConcurrentRequestsForOneLayerAreMergedIntoOneProductWithTheSameResults) {
  ThreadPool pool(2);
  LocalFfn ffn(*model_, pool);
  FfnService service(*model_, ffn, {.layers = {0, 2}});
  const std::vector<ExpertAssignment> a{{0, 0, 0.3f}, {0, 2, 0.7f}, {1, 1, 0.6f}, {1, 3, 0.4f}};
  const std::string alone = service.walk_experts(request(2, a, true), f32_type(), f32_type()).body;
  // Several clients at once: whichever batches form, every answer equals the one computed alone.
  std::vector<std::string> answers(6);
  std::vector<std::thread> clients;
  for (size_t i = 0; i < answers.size(); ++i)
    clients.emplace_back([&, i] { answers[i] = service.walk_experts(request(2, a, true), f32_type(), f32_type()).body; });
  for (auto& t : clients) t.join();
  for (const std::string& answer : answers) EXPECT_EQ(answer.substr(12), alone.substr(12));  // past latency_ms
}

// The reference's layout, built byte by byte from §12's text: [layer][hidden][K]
// [residual][K × (expert, weight)], answered [hidden][latency_ms][values].
std::string reference_request(uint32_t layer, const std::vector<float>& residual,
                              const std::vector<std::pair<uint32_t, float>>& experts, bool f16) {
  std::string b(12, '\0');
  store_u32(reinterpret_cast<uint8_t*>(b.data()), layer);
  store_u32(reinterpret_cast<uint8_t*>(b.data()) + 4, uint32_t(residual.size()));
  store_u32(reinterpret_cast<uint8_t*>(b.data()) + 8, uint32_t(experts.size()));
  for (float v : residual) {
    if (f16) {
      const uint16_t h = f32_to_f16(v);
      b.push_back(char(h & 0xff)), b.push_back(char(h >> 8));
    } else {
      b.append(reinterpret_cast<const char*>(&v), 4);
    }
  }
  for (const auto& [id, weight] : experts) b.append(reinterpret_cast<const char*>(&id), 4).append(reinterpret_cast<const char*>(&weight), 4);
  return b;
}

TEST_F(ExpertService, TheReferencesLayerBatchRoutesNormTheResidualAndSumInTheGivenOrder) {
  ThreadPool pool(1);
  LocalFfn ffn(*model_, pool);
  FfnService service(*model_, ffn, {.layers = {0, 2}, .experts = {0, 2}});
  const std::vector<float> residual(x_.begin(), x_.begin() + H_);
  const std::vector<std::pair<uint32_t, float>> experts{{2, 0.6f}, {0, 0.4f}, {1, 0.0f}};  // top-k order, a zero weight
  // What the answer must be: the layer's FFN norm, each expert alone, summed in the order given.
  std::vector<float> normed(H_), rows(3 * H_), want(H_);
  const LayerWeights& w = model_->layers[1];
  rmsnorm_rows(normed.data(), residual.data(), 1, w.ffn_norm, H_, model_->config.norm_eps, model_->config.norm_weight_offset);
  const std::vector<ExpertAssignment> each{{0, 0, 1}, {0, 1, 1}, {0, 2, 1}};
  ASSERT_TRUE(ffn.expert_rows(1, normed, 1, each, rows).ok());
  for (size_t k = 0; k < H_; ++k) want[k] = 0.6f * rows[2 * H_ + k] + 0.4f * rows[k] + 0.0f * rows[H_ + k];

  const HttpReply r = service.reference_layer_batch(reference_request(1, residual, experts, false), false);
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_EQ(r.body.size(), 8 + 4 * H_);
  EXPECT_EQ(load_u32(reinterpret_cast<const uint8_t*>(r.body.data())), H_);
  std::vector<float> got(H_);
  std::memcpy(got.data(), r.body.data() + 8, 4 * H_);
  EXPECT_EQ(got, want);

  const HttpReply h = service.reference_layer_batch(reference_request(1, residual, experts, true), true);
  ASSERT_EQ(h.status, 200) << h.body;
  ASSERT_EQ(h.body.size(), 8 + 2 * H_);
  for (size_t k = 0; k < H_; ++k) {
    const auto* p = reinterpret_cast<const uint8_t*>(h.body.data()) + 8 + 2 * k;
    EXPECT_NEAR(f16_to_f32(uint16_t(p[0] | p[1] << 8)), want[k], 2e-3f + 2e-3f * std::fabs(want[k]));
  }
  // No experts: zeros. The reference's errors.
  const HttpReply none = service.reference_layer_batch(reference_request(1, residual, {}, false), false);
  ASSERT_EQ(none.status, 200);
  EXPECT_EQ(none.body.substr(8), std::string(4 * H_, '\0'));
  const HttpReply not_owned = service.reference_layer_batch(reference_request(1, residual, {{3, 1.0f}}, false), false);
  EXPECT_EQ(code_of(not_owned), "expert_not_owned");
  EXPECT_NE(not_owned.body.find("expert 3 not owned by this shard (owns 0-2)"), std::string::npos) << not_owned.body;
  const std::vector<float> wrong_hidden(H_ + 1, 0.1f);
  EXPECT_EQ(code_of(service.reference_layer_batch(reference_request(1, wrong_hidden, {{0, 1.0f}}, false), false)), "bad_length");
  EXPECT_EQ(code_of(service.reference_layer_batch(reference_request(1, residual, {{0, 1.0f}}, false).substr(0, 40), false)),
            "truncated");
  EXPECT_EQ(code_of(service.reference_layer_batch(reference_request(7, residual, {{0, 1.0f}}, false), false)),
            "layer_out_of_range");
}

TEST(ExpertCoverage, TheFirstUncoveredIdsAreNamedWhateverTheOrderOfTheRanges) {
  EXPECT_FALSE(first_uncovered({{4, 7}, {0, 3}}, 8));
  EXPECT_FALSE(first_uncovered({{0, UINT32_MAX}}, 8));
  EXPECT_FALSE(first_uncovered({{0, 5}, {2, 7}}, 8));  // overlapping ranges cover too
  const auto gap = first_uncovered({{5, 7}, {0, 2}}, 8);
  ASSERT_TRUE(gap);
  EXPECT_EQ(gap->str(), "3-4");
  EXPECT_EQ(first_uncovered({{0, 2}}, 8)->str(), "3-7");
  EXPECT_EQ(first_uncovered({{1, 7}}, 8)->str(), "0-0");
  EXPECT_EQ(first_uncovered({}, 4)->str(), "0-3");
}

// ---- processes ---------------------------------------------------------------------------

struct Split {
  std::string family;
  std::string low, high;  // expert ranges of the two shards
};

// A fixture's name as a test's ("gptoss-mxfp4": gptoss_mxfp4).
std::string test_name(std::string family) {
  std::replace(family.begin(), family.end(), '-', '_');
  return family;
}

class ExpertShards : public ::testing::TestWithParam<Split> {
 protected:
  // `larql bench --local --json` through two expert shards; the dense MLPs (Qwen3-MoE's dense
  // layers, Gemma 4's MLP beside the experts) on the first.
  json bench(const std::string& wires, bool expert_rows) {
    const Split& s = GetParam();
    const std::string model = test::moe_fixture(s.family).string();
    const auto ref = test::reference_output(test::moe_fixture(s.family));
    test::ChildProcess a({"serve", model, "--port", "0", "--experts", s.low, "--wire-i8", "--threads", "1"});
    test::ChildProcess b({"serve", model, "--port", "0", "--experts", s.high, "--wire-i8", "--threads", "1"});
    EXPECT_TRUE(test::wait_healthy(a.url()) && test::wait_healthy(b.url()));
    std::string map = "0-99/" + s.low + "=" + a.url() + ",0-99/" + s.high + "=" + b.url();
    map += ",0-99/dense=" + a.url();
    std::string ids;
    for (int id : ref.tokens) ids.append(" ").append(std::to_string(id));
    const auto r = test::run_command(std::string(LARQL_BINARY) + " bench " + model + " --ffn '" + map + "' --wire " + wires +
                                     " --prompt-ids" + ids + " --steps 16 --local --json --threads 1" +
                                     (expert_rows ? " --expert-rows" : ""));
    // bench --local exits 1 when remote f32 differs from local at all: allowed for weighted
    // sums, whose partial sums are added per expert range.
    EXPECT_TRUE(r.status == 0 || (!expert_rows && r.status == 1)) << r.output;
    return r.status <= 1 ? json::parse(r.output, nullptr, false) : json::object();
  }
};

TEST_P(ExpertShards, PerExpertRowsInF32AreBitIdenticalToLocalForThisSplit) {
  const json doc = bench("f32", true);
  ASSERT_TRUE(doc.contains("formats")) << doc.dump();
  EXPECT_TRUE(doc["remote_f32_exact"].get<bool>()) << "per-expert rows summed on the client must equal local bit for bit";
  EXPECT_EQ(doc["formats"][0]["max_abs_logit_diff"].get<double>(), 0.0);
}

TEST_P(ExpertShards, WeightedSumsAgreeOnTopOneInF32AndEveryEncodingStaysFinite) {
  const json doc = bench("f32,f16,q8,i8", false);
  ASSERT_TRUE(doc.contains("formats")) << doc.dump();
  for (const auto& f : doc["formats"]) {
    if (f["wire"] == "f32") { EXPECT_EQ(f["top1_agreement"].get<double>(), 1.0); }
    EXPECT_TRUE(std::isfinite(f["max_abs_logit_diff"].get<double>())) << f["wire"];
    std::printf("%s weighted sums %s: top-1 %.3f, top-5 %.3f, max |logit diff| %.3g, mean KL %.3g, bytes/token %.0f\n",
                GetParam().family.c_str(), f["wire"].get<std::string>().c_str(), f["top1_agreement"].get<double>(),
                f["topk_agreement"].get<double>(), f["max_abs_logit_diff"].get<double>(), f["mean_kl"].get<double>(),
                f["bytes_sent_per_token"].get<double>() + f["bytes_received_per_token"].get<double>());
  }
}

INSTANTIATE_TEST_SUITE_P(Families, ExpertShards,
                         ::testing::Values(Split{"mixtral", "0-0", "1-3"}, Split{"qwen3moe", "0-4", "5-7"},
                                           Split{"qwen2moe", "0-4", "5-8"},  // 8: its shared expert
                                           Split{"gemma4moe", "0-3", "4-7"}, Split{"gptoss", "0-1", "2-3"},
                                           Split{"gptoss-mxfp4", "0-2", "3-3"}),
                         [](const auto& info) { return test_name(info.param.family); });

// The same split behind a router: it asks its parts for per-expert rows and sums them in
// the one order, so even weighted sums are bit-identical to local, and a per-expert rows
// request splices the parts' bytes back in assignment order.
class RoutedExperts : public ::testing::TestWithParam<Split> {};

// "0-L": a router maps whole layer ranges of the model, no further.
std::string all_layers(const std::string& family) {
  std::ifstream in(test::moe_fixture(family) / "config.json");
  return "0-" + std::to_string(json::parse(in)["num_hidden_layers"].get<int>() - 1);
}

TEST_P(RoutedExperts, ARouterSplittingExpertRangesGivesLogitsBitIdenticalToLocal) {
  const Split& s = GetParam();
  const std::string model = test::moe_fixture(s.family).string();
  const auto ref = test::reference_output(test::moe_fixture(s.family));
  test::ChildProcess a({"serve", model, "--port", "0", "--experts", s.low, "--threads", "1"});
  test::ChildProcess b({"serve", model, "--port", "0", "--experts", s.high, "--threads", "1"});
  ASSERT_TRUE(test::wait_healthy(a.url()) && test::wait_healthy(b.url()));
  const std::string L = all_layers(s.family);
  test::ChildProcess router({"router", "--port", "0", "--shards",
                             L + "/" + s.low + "=" + a.url() + "," + L + "/" + s.high + "=" + b.url() + "," + L + "/dense=" + a.url()});
  ASSERT_TRUE(test::wait_healthy(router.url()));
  std::string ids;
  for (int id : ref.tokens) ids.append(" ").append(std::to_string(id));
  for (const char* rows : {"", " --expert-rows"}) {
    const auto r = test::run_command(std::string(LARQL_BINARY) + " bench " + model + " --ffn " + router.url() +
                                     " --wire f32 --prompt-ids" + ids + " --steps 12 --local --json --threads 1" + rows);
    ASSERT_EQ(r.status, 0) << r.output;
    const json doc = json::parse(r.output);
    EXPECT_TRUE(doc["remote_f32_exact"].get<bool>()) << "through the router" << rows;
  }
  const json stats = json::parse(test::run_command("curl -s " + router.url() + "/v1/stats").output);
  // Expert ids: the routed ones, then the shared ones (Qwen2-MoE's one).
  EXPECT_EQ(stats["experts"]["end"].get<size_t>() + 1, stats["experts"]["count"].get<size_t>() + stats["experts"]["shared"].get<size_t>());
  EXPECT_EQ(stats["experts"]["shared"].get<size_t>(), s.family == "qwen2moe" ? 1u : 0u);
}

TEST(RoutedExpertsInF16, ARouterAskingItsPartsInF16StaysCloseToLocal) {
  const std::string model = test::moe_fixture("qwen3moe").string();
  const auto ref = test::reference_output(test::moe_fixture("qwen3moe"));
  test::ChildProcess a({"serve", model, "--port", "0", "--experts", "0-4", "--threads", "1"});
  test::ChildProcess b({"serve", model, "--port", "0", "--experts", "5-7", "--threads", "1"});
  ASSERT_TRUE(test::wait_healthy(a.url()) && test::wait_healthy(b.url()));
  const std::string L = all_layers("qwen3moe");
  test::ChildProcess router({"router", "--port", "0", "--shard-wire", "f16", "--shards",
                             L + "/0-4=" + a.url() + "," + L + "/5-7=" + b.url() + "," + L + "/dense=" + a.url()});
  ASSERT_TRUE(test::wait_healthy(router.url()));
  std::string ids;
  for (int id : ref.tokens) ids.append(" ").append(std::to_string(id));
  // Exit 1: remote f32 is no longer bit-identical (the parts' rows went as f16).
  const auto r = test::run_command(std::string(LARQL_BINARY) + " bench " + model + " --ffn " + router.url() +
                                   " --wire f32 --prompt-ids" + ids + " --steps 12 --local --json --threads 1 --expert-rows");
  ASSERT_EQ(r.status, 1) << r.output;
  const json f32 = json::parse(r.output)["formats"][0];
  EXPECT_GT(f32["max_abs_logit_diff"].get<double>(), 0.0) << "the parts answered in f16";
  EXPECT_LT(f32["max_abs_logit_diff"].get<double>(), 0.05);
  EXPECT_EQ(f32["top1_agreement"].get<double>(), 1.0);
}

INSTANTIATE_TEST_SUITE_P(Families, RoutedExperts,
                         ::testing::Values(Split{"qwen3moe", "0-4", "5-7"}, Split{"qwen2moe", "0-2", "3-8"},
                                           Split{"gemma4moe", "0-3", "4-7"}, Split{"gptoss-mxfp4", "0-1", "2-3"}),
                         [](const auto& info) { return test_name(info.param.family); });

TEST(RoutedExpertsUnderLoad, KillingOneReplicaOfEachExpertRangeCostsNoClientErrorAndNoWrongId) {
  const std::string model = test::moe_fixture("mixtral").string();
  const auto ref = test::reference_output(test::moe_fixture("mixtral"));
  std::vector<std::unique_ptr<test::ChildProcess>> shards;
  for (const char* experts : {"0-1", "0-1", "2-3", "2-3"})
    shards.push_back(std::make_unique<test::ChildProcess>(
        std::vector<std::string>{"serve", model, "--port", "0", "--experts", experts, "--threads", "1"}));
  for (const auto& s : shards) ASSERT_TRUE(test::wait_healthy(s->url()));
  const std::string L = all_layers("mixtral");
  test::ChildProcess router({"router", "--port", "0", "--shards",
                             L + "/0-1=" + shards[0]->url() + "|" + shards[1]->url() + "," + L + "/2-3=" + shards[2]->url() +
                                 "|" + shards[3]->url()});
  ASSERT_TRUE(test::wait_healthy(router.url()));
  std::string ids;
  for (int id : ref.tokens) ids.append(" ").append(std::to_string(id));
  const std::string run = std::string(LARQL_BINARY) + " run " + model + " --prompt-ids" + ids + " --steps 12 --json";
  const json local = json::parse(test::run_command(run).output);

  test::CommandResult load;
  std::thread loader([&] {
    load = test::run_command(std::string(LARQL_BINARY) + " loadtest " + router.url() +
                             " --experts --clients 4 --seconds 3 --rows 1-8 --json");
  });
  // Once the router is carrying the load, one replica of each expert range dies.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (test::server_metric(router.url(), "larql_router_requests_total") < 50 && std::chrono::steady_clock::now() < until)
    std::this_thread::yield();
  for (size_t pair : {0, 2}) {  // the replica that has been doing the range's work dies
    const double first = test::server_metric(shards[pair]->url(), "larql_shard_requests_total");
    const double second = test::server_metric(shards[pair + 1]->url(), "larql_shard_requests_total");
    EXPECT_GT(std::max(first, second), 0) << "the load reached experts " << (pair ? "2-3" : "0-1");
    shards[first >= second ? pair : pair + 1]->kill_now();
  }
  loader.join();
  ASSERT_EQ(load.status, 0) << load.output;
  const json report = json::parse(load.output)["load"];
  EXPECT_GT(report["ok"].get<double>(), 50);
  EXPECT_EQ(report["answers"].size(), 1u) << report["answers"].dump();
  EXPECT_EQ(report["answers"].value("200", 0.0), report["requests"].get<double>()) << "every request answered 200 across the kills";
  std::printf("%s\n", report["answers"].dump().c_str());

  const json remote = json::parse(test::run_command(run + " --ffn " + router.url() + " --wire f32").output);
  EXPECT_EQ(remote["generated_ids"], local["generated_ids"]);
}

TEST(ExpertShardMap, TheRouterRefusesAGapAmongExpertRangesNamingIt) {
  const std::string model = test::moe_fixture("qwen3moe").string();
  test::ChildProcess a({"serve", model, "--port", "0", "--experts", "0-2", "--threads", "1"});
  test::ChildProcess b({"serve", model, "--port", "0", "--experts", "5-7", "--threads", "1"});
  ASSERT_TRUE(test::wait_healthy(a.url()) && test::wait_healthy(b.url()));
  const auto r = test::run_command(std::string(LARQL_BINARY) + " router --port 0 --shards '0-2/0-2=" + a.url() + ",0-2/5-7=" +
                                   b.url() + "' 2>&1");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("leaves experts 3-4 of layer 0 without a shard"), std::string::npos) << r.output;
}

TEST(ExpertShardMap, AGapAmongTheExpertRangesIsRefusedNamingIt) {
  const std::string model = test::moe_fixture("qwen3moe").string();
  test::ChildProcess a({"serve", model, "--port", "0", "--experts", "0-2", "--threads", "1"});
  test::ChildProcess b({"serve", model, "--port", "0", "--experts", "5-7", "--threads", "1"});
  ASSERT_TRUE(test::wait_healthy(a.url()) && test::wait_healthy(b.url()));
  const auto r = test::run_command(std::string(LARQL_BINARY) + " run " + model + " --ffn '0-2/0-2=" + a.url() + ",0-2/5-7=" +
                                   b.url() + "' --prompt-ids 1 2 3 --steps 2 2>&1");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("experts 3-4 of layer"), std::string::npos) << r.output;
  // A plain part for a shard that owns some experts only: refused, with the map part to write.
  const auto plain = test::run_command(std::string(LARQL_BINARY) + " run " + model + " --ffn '" + a.url() + "' --prompt-ids 1 2 --steps 1 2>&1");
  EXPECT_NE(plain.status, 0);
  EXPECT_NE(plain.output.find("owns only experts 0-2"), std::string::npos) << plain.output;
}

}  // namespace
}  // namespace larql
