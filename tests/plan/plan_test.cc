#include "plan/shard_plan.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "infer/kv_cache.h"
#include "model/gguf_loader.h"
#include "model/kv_sharing.h"
#include "model/loader.h"
#include "model/synth.h"
#include "net/shard_spec.h"
#include "support/command.h"
#include "support/demo_model.h"
#include "support/process.h"

namespace larql {
namespace {

namespace fs = std::filesystem;
constexpr uint64_t GiB = uint64_t(1) << 30, MiB = uint64_t(1) << 20;

TEST(ModelSizes, TensorsArePlacedByTheirNames) {
  struct Case {
    const char* name;
    TensorPart part;
    size_t layer;
  };
  for (const Case& c : std::initializer_list<Case>{
           {"model.layers.3.mlp.gate_proj.weight", TensorPart::dense_ffn, 3},
           {"model.layers.3.mlp.down_proj.weight", TensorPart::dense_ffn, 3},
           {"model.layers.3.self_attn.q_proj.weight", TensorPart::client, 0},
           {"model.layers.3.post_attention_layernorm.weight", TensorPart::client, 0},
           {"model.layers.12.block_sparse_moe.experts.7.w1.weight", TensorPart::experts, 12},
           {"model.layers.12.block_sparse_moe.gate.weight", TensorPart::client, 0},   // Mixtral's router
           {"model.layers.2.mlp.gate.weight", TensorPart::client, 0},                 // Qwen-MoE's router
           {"model.layers.2.mlp.experts.5.up_proj.weight", TensorPart::experts, 2},
           {"model.layers.2.mlp.shared_expert.down_proj.weight", TensorPart::experts, 2},  // Qwen2-MoE's: an expert id
           {"model.layers.2.mlp.shared_expert_gate.weight", TensorPart::client, 0},
           {"model.layers.1.mlp.router.weight", TensorPart::client, 0},               // GPT-OSS
           {"model.layers.1.mlp.experts.gate_up_proj_blocks", TensorPart::experts, 1},
           {"model.language_model.layers.4.mlp.up_proj.weight", TensorPart::dense_ffn, 4},  // Gemma 3/4 multimodal
           {"model.embed_tokens.weight", TensorPart::client, 0},
           {"blk.5.ffn_down.weight", TensorPart::dense_ffn, 5},
           {"blk.5.ffn_gate_exps.weight", TensorPart::experts, 5},
           {"blk.5.ffn_gate_up_exps.weight", TensorPart::experts, 5},
           {"blk.5.ffn_gate_inp.weight", TensorPart::client, 0},
           {"blk.5.ffn_down_shexp.weight", TensorPart::experts, 5},
           {"blk.5.ffn_gate_inp_shexp.weight", TensorPart::client, 0},
           {"blk.5.ffn_norm.weight", TensorPart::client, 0},
           {"blk.5.attn_q.weight", TensorPart::client, 0},
           {"token_embd.weight", TensorPart::client, 0},
       }) {
    const TensorPlace p = place_tensor(c.name);
    EXPECT_EQ(p.part, c.part) << c.name;
    if (c.part != TensorPart::client) { EXPECT_EQ(p.layer, c.layer) << c.name; }
  }
}

// A Gemma 3's KV cache for the client: its full layer at every position, its sliding ones
// (a window of 4) at what infer/kv_cache.h keeps of them, about their window.
TEST(Plan, SlidingLayersCountTheirWindowOfTheKvCache) {
  const std::string dir = std::string(LARQL_SOURCE_DIR) + "/tests/data/gemma/gemma3";
  auto sizes = read_model_sizes(dir);
  ASSERT_TRUE(sizes) << sizes.error().message;
  auto model = load_model(dir);
  ASSERT_TRUE(model);
  const ModelConfig& c = model->config;
  ASSERT_EQ(sizes->kv_layers.size(), c.layers);
  uint64_t full = 0, sliding = 0;
  for (size_t l = 0; l < c.layers; ++l) {
    const bool is_sliding = c.layer(l).attention == AttentionKind::sliding;
    EXPECT_EQ(sizes->kv_layers[l], std::make_pair(is_sliding ? size_t(4) : size_t(0), uint64_t(2 * c.kv_dim(l) * 4))) << l;
    (is_sliding ? sliding : full) += 2 * c.kv_dim(l) * 4;
  }
  ASSERT_GT(full, 0u);
  ASSERT_GT(sliding, 0u);
  EXPECT_EQ(sizes->kv_bytes(40, 1), 40 * sizes->kv_per_position) << "short sequences: every position in every layer";
  // 10000 positions: the sliding layers keep 4 + 64 (a sequence going back) + 64 (a drop's
  // step) + 32 (key blocks) + 65 (a pass's rows).
  EXPECT_EQ(sizes->kv_bytes(10000, 65), 10000 * full + (4 + 64 + 64 + 32 + 65) * sliding);
}

// Every byte of the demo models' tensors is counted once, and the splits' maps are maps the
// router takes.
TEST(Plan, TheDemoModelsSplitEvenlyIntoMapsTheRouterTakes) {
  auto sizes = read_model_sizes(test::kDemo);
  ASSERT_TRUE(sizes) << sizes.error().message;
  auto model = load_model(test::kDemo);
  ASSERT_TRUE(model);
  EXPECT_EQ(sizes->layers, 6u);
  EXPECT_EQ(sizes->experts, 0u);
  EXPECT_EQ(sizes->kv_per_position, model->config.kv_bytes_per_position());
  const uint64_t mlp = 3 * uint64_t(model->config.hidden) * model->config.ffn * 2;  // gate, up, down in bf16
  for (uint64_t b : sizes->dense_ffn) EXPECT_EQ(b, mlp);
  uint64_t header = 0;
  std::ifstream(test::kDemo + "/model.safetensors", std::ios::binary).read(reinterpret_cast<char*>(&header), 8);
  EXPECT_EQ(fs::file_size(test::kDemo + "/model.safetensors"), 8 + header + sizes->total())
      << "every tensor byte counted once: the file is its header and its tensors";

  auto machines = parse_machines("a=1G,b=1G");
  ASSERT_TRUE(machines);
  auto plan = plan_shards(*sizes, *machines, {});
  ASSERT_TRUE(plan) << plan.error().message;
  ASSERT_EQ(plan->shards.size(), 2u);
  EXPECT_EQ(plan->shards[0].first, 0u);
  EXPECT_EQ(plan->shards[0].last, 2u);
  EXPECT_EQ(plan->shards[1].first, 3u);
  EXPECT_EQ(plan->shards[1].last, 5u);
  const std::string map = shard_map(*plan, *sizes, 9001);
  EXPECT_EQ(map, "0-2=http://a:9001,3-5=http://b:9001");
  EXPECT_TRUE(parse_shard_spec(map)) << map;

  const std::string moe_path = std::string(LARQL_SOURCE_DIR) + "/models/demo-moe";
  auto moe = read_model_sizes(moe_path);
  ASSERT_TRUE(moe) << moe.error().message;
  EXPECT_EQ(moe->experts, 8u);
  auto four = parse_machines("a=1G,b=1G,c=1G,d=1G");
  ASSERT_TRUE(four);
  PlanOptions replicated;
  replicated.replicas = 2;
  auto moe_plan = plan_shards(*moe, *four, replicated);
  ASSERT_TRUE(moe_plan) << moe_plan.error().message;
  EXPECT_TRUE(moe_plan->by_experts);
  const std::string moe_map = shard_map(*moe_plan, *moe, 9001);
  EXPECT_EQ(moe_map, "0-3/0-3=http://a:9001|http://b:9001,0-3/4-7=http://c:9001|http://d:9001");
  EXPECT_TRUE(parse_shard_spec(moe_map)) << moe_map;
  PlanOptions bad;
  bad.replicas = 3;
  auto refused = plan_shards(*moe, *four, bad);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("groups of 3 replicas"), std::string::npos);
}

// The same MoE model written as GGUF weighs the same by GGUF's names (nothing read but the header).
TEST(Plan, AGgufOfTheMoeDemoWeighsAsItsHuggingFaceFiles) {
  const std::string moe_path = std::string(LARQL_SOURCE_DIR) + "/models/demo-moe";
  auto model = load_model(moe_path);
  ASSERT_TRUE(model) << model.error().message;
  const fs::path gguf = fs::temp_directory_path() / ("larql-plan-moe-" + std::to_string(::getpid()) + ".gguf");
  ASSERT_TRUE(export_gguf(*model, gguf.string(), {}));
  auto from_gguf = read_model_sizes(gguf.string());
  auto from_hf = read_model_sizes(moe_path);
  fs::remove(gguf);
  ASSERT_TRUE(from_gguf) << from_gguf.error().message;
  ASSERT_TRUE(from_hf);
  EXPECT_EQ(from_gguf->expert_ffn, from_hf->expert_ffn) << "bf16 experts either way";
  EXPECT_EQ(from_gguf->layers, from_hf->layers);
  EXPECT_EQ(from_gguf->experts, 8u);
}

// The 0.85B shape (16 layers, hidden 2048, FFN 5632, vocabulary 32000, bf16) as a config and a
// safetensors header over a sparse file: its sizes without 1.7 GB on disk.
TEST(Plan, The085BShapeSplitsByMemoryAndTooLittleIsRefused) {
  const fs::path dir = fs::temp_directory_path() / ("larql-plan-085b-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const size_t H = 2048, F = 5632, V = 32000, L = 16, KV = 512;
  std::ofstream(dir / "config.json") << nlohmann::json{{"architectures", {"LlamaForCausalLM"}}, {"model_type", "llama"},
                                                       {"vocab_size", V}, {"hidden_size", H}, {"intermediate_size", F},
                                                       {"num_hidden_layers", L}, {"num_attention_heads", 32},
                                                       {"num_key_value_heads", 8}, {"max_position_embeddings", 4096},
                                                       {"rms_norm_eps", 1e-5}, {"tie_word_embeddings", false}}
                                            .dump();
  nlohmann::ordered_json header;
  uint64_t offset = 0;
  auto tensor = [&](const std::string& name, std::vector<size_t> shape) {
    uint64_t bytes = 2;
    for (size_t d : shape) bytes *= d;
    header[name] = {{"dtype", "BF16"}, {"shape", shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  };
  tensor("model.embed_tokens.weight", {V, H});
  for (size_t l = 0; l < L; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    for (const char* n : {"q_proj", "o_proj"}) tensor(p + "self_attn." + n + ".weight", {H, H});
    for (const char* n : {"k_proj", "v_proj"}) tensor(p + "self_attn." + n + ".weight", {KV, H});
    tensor(p + "mlp.gate_proj.weight", {F, H});
    tensor(p + "mlp.up_proj.weight", {F, H});
    tensor(p + "mlp.down_proj.weight", {H, F});
    tensor(p + "input_layernorm.weight", {H});
    tensor(p + "post_attention_layernorm.weight", {H});
  }
  tensor("model.norm.weight", {H});
  tensor("lm_head.weight", {V, H});
  std::string text = header.dump();
  text.resize((text.size() + 7) / 8 * 8, ' ');
  {
    std::ofstream out(dir / "model.safetensors", std::ios::binary);
    const uint64_t n = text.size();
    out.write(reinterpret_cast<const char*>(&n), 8);
    out << text;
  }
  fs::resize_file(dir / "model.safetensors", 8 + text.size() + offset);  // sparse: no block written
  auto sizes = read_model_sizes(dir.string());
  ASSERT_TRUE(sizes) << sizes.error().message;
  EXPECT_EQ(sizes->ffn_total(), L * 3 * H * F * 2);
  EXPECT_EQ(sizes->client, 2 * V * H * 2 + L * (2 * H * H + 2 * KV * H + 2 * H) * 2 + H * 2);
  EXPECT_EQ(sizes->kv_per_position, L * 2 * KV * 4);
  // Usable for weights: 2 GiB × 0.9 − 256 MiB = 1.55 GiB and 1 GiB × 0.9 − 256 MiB = 0.65 GiB;
  // a layer's FFN is 66 MiB. 11 layers and 5 fill them to 46% and 50%, 12 and 4 to 50% and
  // 40%: the fuller one is emptier with 11.
  auto machines = parse_machines("big=2G,small=1G");
  ASSERT_TRUE(machines);
  auto plan = plan_shards(*sizes, *machines, {});
  ASSERT_TRUE(plan) << plan.error().message;
  ASSERT_EQ(plan->shards.size(), 2u);
  EXPECT_EQ(plan->shards[0].last - plan->shards[0].first + 1, 11u);
  EXPECT_LE(plan->shards[0].bytes, plan->shards[0].usable);
  EXPECT_LE(plan->shards[1].bytes, plan->shards[1].usable);
  auto small = parse_machines("a=512M,b=512M");
  ASSERT_TRUE(small);
  auto refused = plan_shards(*sizes, *small, {});
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("does not fit these machines"), std::string::npos) << refused.error().message;
  fs::remove_all(dir);
}

// A plan carried out on loopback: each machine's `larql serve` arguments as the plan gives
// them, the plan's map with each machine's name and port replaced by its shard's URL, and
// `larql run --ffn MAP` over f32 gives the local run's greedy ids. The demo (by layers) and a
// Qwen3-MoE with a dense layer (by experts, the dense MLPs on the first shard).
void expect_plan_runs_like_local(const std::string& model, const std::string& extra_run_args) {
  auto sizes = read_model_sizes(model);
  ASSERT_TRUE(sizes) << sizes.error().message;
  auto machines = parse_machines("a=1G,b=1G");
  ASSERT_TRUE(machines);
  auto plan = plan_shards(*sizes, *machines, {});
  ASSERT_TRUE(plan) << plan.error().message;
  ASSERT_EQ(plan->shards.size(), 2u);
  std::string map = shard_map(*plan, *sizes, 9001);
  std::vector<std::unique_ptr<test::ChildProcess>> shards;
  for (const auto& a : plan->shards) {
    const std::string range = std::to_string(a.first) + "-" + std::to_string(a.last);
    shards.push_back(std::make_unique<test::ChildProcess>(std::vector<std::string>{
        "serve", model, "--port", "0", "--threads", "1", plan->by_experts ? "--experts" : "--layers", range}));
    const std::string name = "http://" + a.machines[0] + ":9001";
    for (size_t at = map.find(name); at != std::string::npos; at = map.find(name)) map.replace(at, name.size(), shards.back()->url());
  }
  const std::string run = std::string(LARQL_BINARY) + " run " + model + " --prompt-ids 1 2 3 --steps 8 --json";
  const auto local = test::run_command(run + " 2>/dev/null");
  const auto remote = test::run_command(run + " --wire f32 " + extra_run_args + " --ffn '" + map + "' 2>&1");
  ASSERT_EQ(local.status, 0) << local.output;
  ASSERT_EQ(remote.status, 0) << map << "\n" << remote.output;
  const auto ids = [](const std::string& out) { return nlohmann::json::parse(out.substr(out.rfind("\n{") + 1))["generated_ids"]; };
  EXPECT_EQ(ids(remote.output), ids("\n" + local.output)) << map;
  EXPECT_EQ(ids(remote.output).size(), 8u);
  std::printf("plan on loopback: %s -> %s\n", map.c_str(), ids(remote.output).dump().c_str());
}

TEST(Plan, ItsMapAndCommandsRunTheModelsOnLoopbackAsLocally) {
  expect_plan_runs_like_local(test::kDemo, "");
  const fs::path dir = fs::temp_directory_path() / ("larql-plan-q3moe-" + std::to_string(::getpid()));
  SynthSpec spec;
  spec.family = "qwen3moe";
  spec.hidden = 64;
  spec.ffn = 128;
  spec.layers = 4;
  spec.heads = 4;
  spec.kv_heads = 2;
  spec.vocab = 256;
  spec.seed = 3;
  spec.dense_layers = {0};
  ASSERT_TRUE(write_synthetic_checkpoint(dir.string(), spec));
  expect_plan_runs_like_local(dir.string(), "--expert-rows");
  fs::remove_all(dir);
}

// Session shards (PROTOCOL §13): every layer whole on some shard, a KV budget that holds
// exactly --parallel sessions of --ctx positions as a shard reserves them, and no range that
// splits Gemma 4 E's KV-sharing groups however tight the machines.
TEST(Plan, SessionRangesHoldTheirBudgetAndNeverSplitAKvSharingGroup) {
  auto demo = read_model_sizes(test::kDemo);
  ASSERT_TRUE(demo) << demo.error().message;
  auto model = load_model(test::kDemo);
  ASSERT_TRUE(model.ok());
  auto machines = parse_machines("a=1G,b=1G");
  ASSERT_TRUE(machines);
  auto plan = plan_shards(*demo, *machines, {.sessions = true, .session_positions = 500, .session_sequences = 3});
  ASSERT_TRUE(plan) << plan.error().message;
  ASSERT_EQ(plan->shards.size(), 2u);
  EXPECT_EQ(plan->shards[0].first, 0u);
  EXPECT_EQ(plan->shards[1].last, 5u);
  for (const auto& a : plan->shards) {
    const auto capacity = kv_capacity_positions(model->config, 500, 2048);
    EXPECT_EQ(a.kv_bytes, 3 * kv_capacity_bytes(model->config, capacity, a.first, a.last)) << a.first << "-" << a.last;
    EXPECT_EQ(a.bytes, demo->layer_bytes(a.first, a.last) + a.kv_bytes);
  }
  // Gemma 4 E: six layers, the last two reading layers 2 and 3's caches; on six machines too
  // small for two layers each, the ranges still keep 2-5 whole.
  const fs::path dir = fs::temp_directory_path() / ("larql-plan-g4e-" + std::to_string(::getpid()));
  ASSERT_TRUE(write_synthetic_checkpoint(dir.string(), {.family = "gemma4", .hidden = 64, .layers = 6, .ffn = 128, .heads = 2,
                                                        .kv_heads = 1, .head_dim = 16, .sliding_window = 8, .vocab = 256,
                                                        .context = 1024, .dtype = DType::f32, .seed = 3, .ple_dim = 8,
                                                        .kv_shared = 2, .sliding_period = 2})
                  .ok());
  auto sizes = read_model_sizes(dir.string());
  auto g4 = load_model(dir.string());
  fs::remove_all(dir);
  ASSERT_TRUE(sizes) << sizes.error().message;
  ASSERT_TRUE(g4.ok());
  const std::vector<bool> cuts = session_cuts(*sizes);
  EXPECT_EQ(cuts, (std::vector<bool>{true, true, true, false, false, false}));
  auto six = parse_machines("a=300M,b=300M,c=300M,d=300M,e=300M,f=300M");
  ASSERT_TRUE(six);
  PlanOptions tight{.headroom = 0, .process_bytes = 0, .sessions = true, .session_positions = 64, .session_sequences = 1};
  uint64_t largest = 0;
  for (size_t l = 0; l < 6; ++l) largest = std::max(largest, sizes->layer_bytes(l, l));
  for (auto& m : *six) m.bytes = 2 * largest;  // room for about two layers: a free plan would cut inside 2-5
  const uint64_t group = sizes->layer_bytes(2, 5) + sizes->kv_bytes(64, 2048, 2, 5);
  for (auto& m : *six) m.bytes = std::max(m.bytes, group);
  auto g4_plan = plan_shards(*sizes, *six, tight);
  ASSERT_TRUE(g4_plan) << g4_plan.error().message;
  for (const auto& a : g4_plan->shards)
    EXPECT_TRUE(check_range_keeps_kv_groups(g4->config, a.first, a.last).ok()) << a.first << "-" << a.last;
  // Expert splits are not session ranges.
  EXPECT_FALSE(plan_shards(*demo, *machines, {.split = PlanOptions::Split::experts, .sessions = true}));
}

TEST(Plan, MachinesAndSizesAreReadOrRefusedByName) {
  EXPECT_EQ(*parse_bytes("24G"), 24 * GiB);
  EXPECT_EQ(*parse_bytes("1.5GiB"), GiB + GiB / 2);
  EXPECT_EQ(*parse_bytes("512M"), 512 * MiB);
  EXPECT_FALSE(parse_bytes("lots"));
  EXPECT_FALSE(parse_bytes("-1G"));
  EXPECT_FALSE(parse_machines("a=1G,a=2G")) << "a name twice";
  auto noeq = parse_machines("a");
  ASSERT_FALSE(noeq);
  EXPECT_NE(noeq.error().message.find("NAME=MEMORY"), std::string::npos);
}

}  // namespace
}  // namespace larql
