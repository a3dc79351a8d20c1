// `larql demo`: starts two shard servers (half the layers each, i8 enabled; with --moe,
// half the experts of every layer each) and a router as child processes on free loopback
// ports, generates from a prompt locally and through the grid in every wire encoding (f32,
// f16, q8, i8), prints each text and a table, and stops everything. With --sessions the
// shards run whole layers (serve --sessions) and the table puts FFN mode and layer-range
// sessions side by side.
#include "cli/demo_command.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <iostream>

#include "cli/model_notes.h"
#include "eval/wire_bench.h"
#include "infer/generate.h"
#include "infer/local_ffn.h"
#include "model/loader.h"
#include "net/child_process.h"
#include "net/remote_ffn.h"
#include "net/remote_layers.h"

namespace larql::cli {
namespace {

int say_error(const std::string& m) {
  std::cerr << "larql demo: " << m << std::endl;
  return 1;
}

struct Options {
  std::optional<std::string> model, tokenizer;
  std::string prompt = "And the LORD said unto Moses,";
  size_t layers_per_shard = 0;  // 0: half the layers each
  size_t steps = 40;
  bool keep_running = false;
  bool moe = false;  // a mixture-of-experts model, its experts split over the two shards
  bool sessions = false;  // session shards: FFN mode and layer-range sessions side by side
};

// Children are tracked here so a signal can stop them all.
std::vector<pid_t> g_children;
std::vector<int> g_child_stdout;  // kept open while they run, so a late print cannot SIGPIPE them
volatile sig_atomic_t g_interrupted = 0;

void stop_children() {
  for (pid_t p : g_children) kill(p, SIGTERM);
  for (pid_t p : g_children) {
    int status;
    for (int i = 0; i < 500 && waitpid(p, &status, WNOHANG) == 0; ++i) usleep(10000);  // up to 5 s, then force
    if (waitpid(p, &status, WNOHANG) == 0) {
      kill(p, SIGKILL);
      waitpid(p, &status, 0);
    }
  }
  g_children.clear();
  for (int fd : g_child_stdout) close(fd);
  g_child_stdout.clear();
}

void on_signal(int) { g_interrupted = 1; }

// Starts `larql ARGS` (this same binary) and returns the URL it listens on.
std::optional<std::string> spawn(const std::vector<std::string>& args) {
  auto s = spawn_server("/proc/self/exe", args, std::chrono::seconds(60));
  if (!s) return std::nullopt;
  g_children.push_back(s->pid);
  g_child_stdout.push_back(s->stdout_fd);
  if (!wait_healthy(s->url, std::chrono::seconds(30), [] { return !g_interrupted; })) return std::nullopt;
  return s->url;
}

// Greedy text of `steps` tokens; `ranges` (session shards) run the layers when given; the
// decode's seconds per token into `seconds_per_token` when given.
std::string generate_text(const Model& m, const Tokenizer* tok, FfnBackend& ffn, const std::vector<int>& prompt, size_t steps,
                          std::vector<int>* ids, std::vector<LayerRangeBackend*> ranges = {}, double* seconds_per_token = nullptr) {
  ThreadPool pool(2);
  Transformer t(m, ffn, pool);
  if (auto s = t.set_layer_ranges(std::move(ranges)); !s) return "(failed: " + s.error().message + ")";
  auto r = generate(t, prompt, {.max_new_tokens = steps, .ignore_eos = false, .sampler = {}});
  if (!r) return "(failed: " + r.error().message + ")";
  *ids = r->generated;
  if (seconds_per_token && r->generated.size() > 1) *seconds_per_token = r->decode_seconds / double(r->generated.size() - 1);
  if (!tok) {
    std::string s;
    for (int id : r->generated) s += std::to_string(id) + " ";
    return s;
  }
  // The continuation as it reads after the prompt: decode both and keep the difference,
  // so a leading space the tokenizer folds into the first token is not lost.
  std::vector<int> all = prompt;
  all.insert(all.end(), r->generated.begin(), r->generated.end());
  const std::string full = tok->decode(all), head = tok->decode(prompt);
  return full.starts_with(head) ? full.substr(head.size()) : full;
}

// A committed demo model (models/demo, or models/demo-moe): under the current directory,
// else next to the build directory this binary sits in (build/larql -> models/demo), else
// where the package installs it (/usr/bin/larql -> /usr/share/larql/models/demo), so
// `larql demo` works from the repository root, from anywhere else in a checkout, and
// installed.
std::string default_model(const std::string& name) {
  namespace fs = std::filesystem;
  if (fs::exists(name + "/config.json")) return name;
  std::error_code ec;
  const fs::path prefix = fs::read_symlink("/proc/self/exe", ec).parent_path().parent_path();
  if (ec) return name;
  for (const fs::path& candidate : {prefix / name, prefix / "share/larql" / name})
    if (fs::exists(candidate / "config.json")) return candidate.string();
  return name;
}

// Two shards, each half the layers (or of the layers per shard asked for) or, for a
// mixture-of-experts model, each half the experts of every layer (and one of them the dense
// layers, if it has any). The map for the router.
std::optional<std::string> start_shards(const std::string& model_path, const Model& model, const Options& o,
                                        const std::function<void(const std::string&)>& say) {
  const size_t layers = model.config.layers;
  std::string spec;
  if (o.moe) {
    const size_t experts = model.config.moe.expert_ids();
    const std::string all = "0-" + std::to_string(layers - 1);
    const std::string halves[] = {"0-" + std::to_string(experts / 2 - 1), std::to_string(experts / 2) + "-" + std::to_string(experts - 1)};
    for (const std::string& half : halves) {
      say("starting shard for experts " + half + " of layers " + all + " ...");
      auto url = spawn({"serve", model_path, "--port", "0", "--experts", half, "--wire-i8", "--threads", "1"});
      if (!url) return std::nullopt;
      spec += (spec.empty() ? "" : ",") + all + "/" + half + "=" + *url;
      if (&half == &halves[0]) {
        bool dense_layers = model.config.moe.beside_dense;
        for (size_t l = 0; l < layers; ++l) dense_layers = dense_layers || !model.config.layer(l).sparse;
        if (dense_layers) spec += "," + all + "/dense=" + *url;
      }
    }
    return spec;
  }
  const size_t per = o.layers_per_shard ? o.layers_per_shard : (layers + 1) / 2;
  for (size_t first = 0; first < layers; first += per) {
    const size_t last = std::min(layers, first + per) - 1;
    const std::string range = std::to_string(first) + "-" + std::to_string(last);
    say("starting shard for layers " + range + " ...");
    std::vector<std::string> args{"serve", model_path, "--port", "0", "--layers", range, "--wire-i8", "--threads", "1"};
    if (o.sessions) args.push_back("--sessions");
    auto url = spawn(args);
    if (!url) return std::nullopt;
    spec += (spec.empty() ? "" : ",") + range + "=" + *url;
  }
  return spec;
}

// FFN mode (a round trip per layer), layer-range sessions straight to the shards (one per
// range) and through the router (one), over the same session shards, f32 and f16: texts,
// whether each equals the local run, round trips per token, and what a token would take
// over a 20 ms link.
int compare_modes(const Model& model, const Tokenizer* tok, const std::vector<int>& prompt, const std::string& map,
                  const std::string& router, const Options& o) {
  ThreadPool pool(2);
  LocalFfn local(model, pool);
  std::vector<int> local_ids;
  double local_s = 0;
  std::cout << "prompt: " << o.prompt << "\n\nlocal: " << generate_text(model, tok, local, prompt, o.steps, &local_ids, {}, &local_s)
            << "\n";
  struct Row {
    std::string mode, wire;
    bool identical;
    double round_trips, ms;
  };
  std::vector<Row> rows;
  const auto no_env = [](const char*) -> const char* { return nullptr; };
  for (const char* w : {"f32", "f16"}) {
    if (g_interrupted) break;
    const auto wire = *wire::client_wire(w, no_env);
    std::vector<int> ids;
    double s = 0;
    auto ffn = RemoteFfn::connect(model, {map, wire, {}, {}, 10000}, nullptr);
    if (!ffn) return say_error(ffn.error().message);
    std::cout << "FFN mode " << w << ": " << generate_text(model, tok, **ffn, prompt, o.steps, &ids, {}, &s) << "\n";
    const size_t passes = ids.size();  // the prompt's pass and one a token after the first
    rows.push_back({"FFN mode", w, ids == local_ids, double((*ffn)->stats().round_trips) / double(passes), 1e3 * s});
    for (const auto& [mode, url] : {std::pair{std::string("sessions"), map}, std::pair{std::string("via router"), router}}) {
      auto sessions = RemoteLayers::connect(model, {url, wire, {}, {}, 10000, prompt.size() + o.steps}, nullptr);
      if (!sessions) return say_error(sessions.error().message);
      std::cout << mode << " " << w << ": " << generate_text(model, tok, local, prompt, o.steps, &ids, (*sessions)->ranges(), &s)
                << "\n";
      rows.push_back({mode, w, ids == local_ids, double((*sessions)->stats().round_trips) / double(passes), 1e3 * s});
    }
  }
  std::printf("\n%-10s %-5s %-20s %16s %12s %22s\n", "mode", "wire", "identical to local?", "round trips/token", "ms/token",
              "tok/s over 20 ms (est.)");
  for (const Row& r : rows)
    std::printf("%-10s %-5s %-20s %16.1f %12.2f %22.1f\n", r.mode.c_str(), r.wire.c_str(), r.identical ? "yes" : "no", r.round_trips,
                r.ms, 1e3 / (r.round_trips * 20 + r.ms));
  std::printf("(local: %.2f ms/token; the estimate adds 20 ms a round trip to the loopback time)\n", 1e3 * local_s);
  return 0;
}

int run_demo(const Options& o) {
  auto say = [](const std::string& s) { std::cerr << "larql demo: " << s << std::endl; };
  const std::string model_path = o.model.value_or(default_model(o.moe ? "models/demo-moe" : "models/demo"));
  if (!std::filesystem::exists(model_path)) {
    say("no model at " + model_path + ": pass MODEL (a Hugging Face directory or a llama2.c file), or run it from "
        "the repository, whose models/demo (models/demo-moe with --moe) is the default");
    return 2;
  }
  say("loading " + model_path + " ...");
  auto model = load_model(model_path);
  if (!model) return say(model.error().message), 2;
  print_model_notes(*model, "larql demo");
  if (o.moe && o.sessions) return say("--sessions puts whole layers on each shard; it does not split experts (--moe)"), 2;
  if (o.moe && model->config.moe.experts < 2)
    return say("--moe needs a mixture-of-experts model; " + model_path + " has no experts to split"), 2;
  auto tok = load_tokenizer_for(*model, model_path, o.tokenizer);
  if (!tok) return say(tok.error().message), 2;
  const std::vector<int> prompt = *tok ? (*tok)->encode(o.prompt) : std::vector<int>{1};

  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  const auto shards = start_shards(model_path, *model, o, say);
  if (!shards) return stop_children(), say("a shard did not start"), 1;
  const std::string& spec = *shards;
  say("starting the router ...");
  auto router = spawn({"router", "--shards", spec, "--port", "0"});
  if (!router) return stop_children(), say("the router did not start"), 1;
  say("grid up: router " + *router + " in front of " + spec);
  if (o.sessions) {
    const int rc = compare_modes(*model, tok->get(), prompt, spec, *router, o);
    stop_children();
    return rc;
  }

  ThreadPool pool(2);
  LocalFfn local(*model, pool);
  std::vector<int> local_ids;
  std::cout << "prompt: " << o.prompt << "\n\nlocal: " << generate_text(*model, tok->get(), local, prompt, o.steps, &local_ids)
            << "\n";
  std::map<std::string, bool> identical;
  for (const wire::EncodingInfo& info : wire::kEncodings) {
    const std::string w(info.name);
    if (g_interrupted) break;
    std::vector<std::string> warnings;
    auto remote = RemoteFfn::connect(*model, {*router, *wire::client_wire(w, [](const char*) { return nullptr; }), {}, {}, 10000},
                                     &warnings);
    if (!remote) return stop_children(), say(remote.error().message), 1;
    std::vector<int> ids;
    std::cout << "grid " << w << ": " << generate_text(*model, tok->get(), **remote, prompt, o.steps, &ids) << "\n";
    identical[w] = ids == local_ids;
  }
  if (!g_interrupted) {
    WireBenchOptions b;
    b.prompts = {prompt};
    b.steps = o.steps;
    b.local_reference = true;
    b.ffn_spec = *router;
    auto report = run_wire_bench(*model, b);
    if (!report) return stop_children(), say(report.error().message), 1;
    std::printf("\n%-5s %-20s %15s %15s %12s\n", "wire", "identical to local?", "top-5 agreement", "bytes/token", "ms/token");
    for (const auto& f : report->formats) {
      const std::string w(wire::encoding_name(f.wire));
      std::printf("%-5s %-20s %15.3f %15.0f %12.2f\n", w.c_str(), identical[w] ? "yes" : "no", f.topk_agreement,
                  f.bytes_sent_per_token + f.bytes_received_per_token, f.ms_per_token);
    }
  }
  if (o.keep_running && !g_interrupted) {
    std::cout << "\nthe grid stays up (Ctrl-C stops it), router listening on " << *router << "\ntry:\n  larql run "
              << model_path
              << (o.tokenizer ? " --tokenizer " + *o.tokenizer : std::string()) << " --prompt \"" << o.prompt
              << "\" --ffn " << *router << " --wire f16\n"
              << std::flush;
    while (!g_interrupted) pause();
  }
  std::string pids;
  for (pid_t p : g_children) pids += " " + std::to_string(p);
  say("stopping the grid (processes" + pids + ") ...");
  stop_children();
  return 0;
}

}  // namespace

void add_demo_command(CLI::App& app) {
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("demo", "Run the whole grid (two shards and a router) on this machine, end to end");
  cmd->add_option("model", o->model, "model (default: the repository's models/demo)");
  cmd->add_option("--tokenizer", o->tokenizer, "tokenizer file (llama2.c models)");
  cmd->add_option("--prompt", o->prompt, "prompt text")->capture_default_str();
  cmd->add_option("--steps", o->steps, "tokens to generate")->capture_default_str();
  cmd->add_option("--layers-per-shard", o->layers_per_shard, "layers per shard (default: half each)");
  cmd->add_flag("--keep-running", o->keep_running, "leave the grid up and print a larql run command for it");
  cmd->add_flag("--sessions", o->sessions,
                "session shards (serve --sessions): FFN mode and layer-range sessions side by side, round trips per token");
  cmd->add_flag("--moe", o->moe,
                "a mixture-of-experts model (default: models/demo-moe) with half the experts of every layer on each shard");
  cmd->callback([o] {
    if (int rc = run_demo(*o); rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace larql::cli
