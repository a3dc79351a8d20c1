#include "cli/number_checks.h"
#include "cli/plan_command.h"

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "api/api_server.h"
#include "plan/shard_plan.h"

namespace larql::cli {
namespace {

std::string size_text(uint64_t bytes) {
  char buf[32];
  const double b = double(bytes);
  if (bytes >= (uint64_t(1) << 30)) std::snprintf(buf, sizeof buf, "%.2f GiB", b / double(uint64_t(1) << 30));
  else std::snprintf(buf, sizeof buf, "%.1f MiB", b / double(1 << 20));
  return buf;
}

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace

void add_plan_command(CLI::App& app) {
  struct Options {
    std::string model, machines, split = "auto", client;
    size_t replicas = 1, ctx = 4096, parallel = 8;
    double headroom = 10;
    int port = 9001, router_port = 9000;
    bool json = false, sessions = false;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("plan", "Lay a model's FFN over machines: each one's layers (or experts), the shard map, the commands");
  cmd->add_option("model", o->model, "a Hugging Face directory or a GGUF file (only headers are read)")->required();
  cmd->add_option("--machines", o->machines, R"(the shard machines and their memory: "a=24G,b=16G" (names as the router reaches them))")
      ->required();
  cmd->add_option("--replicas", o->replicas, "machines holding each range (each run of this many in --machines)")->capture_default_str();
  cmd->add_option("--split", o->split, "auto (experts for a mixture-of-experts model, else layers), layers or experts")
      ->capture_default_str();
  cmd->add_option("--headroom", o->headroom, "percent of each machine's memory left free")->capture_default_str()->check(CLI::Range(0.0, 99.0));
  cmd->add_option("--port", o->port, "the shards' port")->capture_default_str()->check(CLI::Range(1, 65535));
  cmd->add_option("--router-port", o->router_port, "the router's port")->capture_default_str()->check(CLI::Range(1, 65535));
  cmd->add_option("--ctx", o->ctx, "positions per sequence on the client (its KV cache; at most the model's)")->capture_default_str();
  cmd->add_option("--parallel", o->parallel, "sequences the client decodes at once (larql api --parallel)")->capture_default_str();
  cmd->add_option("--client", o->client, "the client machine's memory (e.g. 16G): check that its part fits");
  cmd->add_flag("--json", o->json, "print the plan as JSON");
  cmd->add_flag("--sessions", o->sessions,
                "layer-range sessions (serve --sessions, run/api --remote-layers): each shard holds its layers whole and a KV "
                "budget of --parallel sequences of --ctx positions; ranges never split a KV-sharing group");
  cmd->callback([o] {
    auto fail = [](const std::string& message) {
      std::cerr << "larql plan: " << message << "\n";
      throw CLI::RuntimeError(1);
    };
    auto sizes = read_model_sizes(o->model);
    if (!sizes) fail(sizes.error().message);
    auto machines = parse_machines(o->machines);
    if (!machines) fail(machines.error().message);
    PlanOptions options;
    options.replicas = o->replicas;
    options.headroom = o->headroom / 100.0;
    if (o->split == "layers") options.split = PlanOptions::Split::layers;
    else if (o->split == "experts") options.split = PlanOptions::Split::experts;
    else if (o->split != "auto") fail("--split is auto, layers or experts, not '" + o->split + "'");
    const size_t session_ctx = sizes->context ? std::min(o->ctx, sizes->context) : o->ctx;
    options.sessions = o->sessions;
    options.session_positions = session_ctx;
    options.session_sequences = std::max<size_t>(o->parallel, 1);
    auto plan = plan_shards(*sizes, *machines, options);
    if (!plan) fail(plan.error().message);
    const std::string map = shard_map(*plan, *sizes, o->port);
    const size_t ctx = sizes->context ? std::min(o->ctx, sizes->context) : o->ctx;  // as larql api caps --ctx
    // `larql api` runs a sequence's rows beside others in passes of a prompt piece or of its
    // drafts and their token, and prompts with none decoding in kPrefillRowsAlone.
    const size_t parallel = std::max<size_t>(o->parallel, 1), beside = std::max(ApiOptions{}.prefill_chunk, kMaxDraft + 1);
    // Over sessions the client keeps the embedding, the final norm and the classifier only.
    uint64_t layer_rest = 0;
    for (uint64_t b : sizes->layer_rest) layer_rest += b;
    const uint64_t kv = o->sessions ? 0 : sizes->kv_bytes(ctx, beside) * (parallel - 1) + sizes->kv_bytes(ctx, kPrefillRowsAlone);
    const uint64_t client_weights = o->sessions ? sizes->client - layer_rest : sizes->client;
    const uint64_t client = client_weights + kv;
    std::optional<uint64_t> client_memory;
    if (!o->client.empty()) {
      auto bytes = parse_bytes(o->client);
      if (!bytes) fail(bytes.error().message);
      client_memory = *bytes;
    }
    const char* unit = plan->by_experts ? "experts" : "layers";
    auto serve_args = [&](const ShardAssignment& a) {
      if (o->sessions)
        return "--layers " + std::to_string(a.first) + "-" + std::to_string(a.last) + " --sessions --session-kv-bytes " +
               std::to_string(a.kv_bytes);
      if (!plan->by_experts) return "--layers " + std::to_string(a.first) + "-" + std::to_string(a.last);
      if (a.first > a.last) return std::string("--experts 0-0   # for the dense MLPs (expert 0 is mapped, not routed here)");
      return "--experts " + std::to_string(a.first) + "-" + std::to_string(a.last);
    };
    if (o->json) {
      nlohmann::json shards = nlohmann::json::array();
      for (const auto& a : plan->shards)
        shards.push_back({{"machines", a.machines}, {"first", a.first}, {"last", a.last}, {"dense", a.dense},
                          {"bytes", a.bytes}, {"usable", a.usable}, {"kv_bytes", a.kv_bytes}});
      std::cout << nlohmann::json{{"split", unit}, {"layers", sizes->layers}, {"experts", sizes->experts}, {"shards", shards},
                                  {"unused", plan->unused}, {"map", map}, {"ffn_bytes", sizes->ffn_total()},
                                  {"client_weight_bytes", client_weights}, {"client_kv_bytes", kv}, {"sessions", o->sessions}}
                       .dump(1)
                << "\n";
    } else {
      std::cout << "model " << o->model << ": " << sizes->layers << " layers"
                << (sizes->experts ? ", " + std::to_string(sizes->experts) + " experts each" : std::string(", dense"))
                << "; FFN " << size_text(sizes->ffn_total()) << " (the shards'), the rest " << size_text(sizes->client) << "\n";
      if (o->sessions)
        std::cout << "client: " << size_text(client_weights) << " of weights (embedding, final norm, classifier; the KV cache is "
                  << "the shards')";
      else
        std::cout << "client: " << size_text(sizes->client) << " of weights + KV cache " << size_text(kv) << " ("
                  << ctx << " positions x " << o->parallel << " sequences, f32) = " << size_text(client);
      if (client_memory)
        std::cout << (double(client) <= double(*client_memory) * (1.0 - options.headroom) ? ": fits " : ": DOES NOT FIT ")
                  << size_text(*client_memory);
      std::cout << "\nshards, by " << unit << ":\n";
      if (o->sessions) std::cout << "(sessions: each shard's layers whole, and a KV budget of " << o->parallel << " sequences x "
                                 << session_ctx << " positions)\n";
      for (const auto& a : plan->shards) {
        std::printf("  %-24s %s %-9s %10s of %s usable (%.0f%%)%s\n", join(a.machines).c_str(), unit,
                    a.first > a.last ? "-" : (std::to_string(a.first) + "-" + std::to_string(a.last)).c_str(),
                    size_text(a.bytes).c_str(), size_text(a.usable).c_str(), 100.0 * double(a.bytes) / double(a.usable),
                    a.dense ? ", and the dense MLPs" : "");
      }
      if (!plan->unused.empty()) std::cout << "  not needed: " << join(plan->unused) << "\n";
      std::cout << "\nshard map: " << map << "\n\n";
      for (const auto& a : plan->shards)
        std::cout << "on " << join(a.machines) << ":\n  larql serve " << o->model << " --host 0.0.0.0 --port " << o->port << " "
                  << serve_args(a) << "\n";
      if (o->sessions) {
        std::cout << "client (one round trip per range a token):\n  larql api " << o->model << " --remote-layers \"" << map
                  << "\"   (or larql run ... --remote-layers the same)\n";
      } else {
        std::cout << "router (any machine; ROUTER below):\n  larql router --host 0.0.0.0 --port " << o->router_port
                  << " --shards \"" << map << "\"\n";
        std::cout << "client:\n  larql api " << o->model << " --ffn http://ROUTER:" << o->router_port
                  << (plan->by_experts ? " --expert-rows" : "") << "   (or larql run ... --ffn the same)\n";
      }
    }
    if (client_memory && double(client) > double(*client_memory) * (1.0 - options.headroom))
      fail("the client's part (" + size_text(client) + ") does not fit its " + size_text(*client_memory) +
           ": lower --ctx or --parallel, or quantise the model");
  });
}

}  // namespace larql::cli
