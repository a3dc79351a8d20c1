// larql: one binary, one subcommand per role (see README). Argument parsing only here;
// the work lives in the libraries.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>
#include <utility>
#include <exception>
#include <new>

#include "cli/api_command.h"
#include "cli/bench_command.h"
#include "cli/demo_command.h"
#include "cli/export_command.h"
#include "cli/loadtest_command.h"
#include "cli/number_checks.h"
#include "cli/router_command.h"
#include "cli/run_command.h"
#include "cli/serve_command.h"
#include "cli/perplexity_command.h"
#include "cli/plan_command.h"
#include "cli/quantize_command.h"
#include "cli/synth_command.h"
#include "cli/tokenize_command.h"
#include "wire/kernels.h"

namespace {

// One example per command, shown at the end of its --help (and so in the man page).
constexpr std::pair<const char*, const char*> kExamples[] = {
    {"run", "larql run models/demo --prompt \"And God said\" --steps 20"},
    {"serve", "larql serve models/demo --layers 0-2 --port 8081"},
    {"api", "larql api models/demo --port 8000 --ffn http://127.0.0.1:9090"},
    {"router", "larql router --port 9090 --shards \"0-2=http://a:8081|http://a2:8081,3-5=http://b:8081\""},
    {"bench", "larql bench models/demo --local --steps 50 --ffn \"0-2=http://a:8081,3-5=http://b:8081\""},
    {"loadtest", "larql loadtest http://127.0.0.1:9090 --clients 8 --seconds 30 --malformed"},
    {"demo", "larql demo --sessions"},
    {"tokenize", "larql tokenize models/demo --text \"In the beginning\""},
    {"synth", "larql synth --out /tmp/synth --hidden 2048 --layers 16 --ffn 5632 --heads 32 --kv-heads 8"},
    {"quantize", "larql quantize models/demo /tmp/demo-q4_k_m.gguf --type q4_k_m"},
    {"export-llama2c", "larql export-llama2c models/demo /tmp/demo.bin"},
    {"perplexity", "larql perplexity /tmp/demo-q8_0.gguf --file tests/data/kjv-heldout.txt --ctx 512"},
    {"plan", "larql plan model.gguf --machines \"a=24G,b=24G\" --sessions --ctx 4096"},
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"larql: transformer inference with remote FFN shards (ADR-0009 wire format)"};
  app.set_version_flag("--version", std::string("larql 0.1.0 (wire kernels: ") + larql::wire::best_kernels().name + ")");
  app.require_subcommand(1);
  app.option_defaults()->always_capture_default();  // every option's --help shows its default
  larql::cli::add_run_command(app);
  larql::cli::add_serve_command(app);
  larql::cli::add_api_command(app);
  larql::cli::add_router_command(app);
  larql::cli::add_bench_command(app);
  larql::cli::add_loadtest_command(app);
  larql::cli::add_demo_command(app);
  larql::cli::add_tokenize_command(app);
  larql::cli::add_synth_command(app);
  larql::cli::add_quantize_command(app);
  larql::cli::add_export_llama2c_command(app);
  larql::cli::add_perplexity_command(app);
  larql::cli::add_plan_command(app);
  larql::cli::check_unsigned_options(app);
  for (const auto& [command, example] : kExamples) app.get_subcommand(command)->footer(std::string("Example:\n  ") + example);
  // The commands return their errors; what still escapes one (an allocation a checkpoint's
  // sizes made fail) ends larql with a message rather than an abort and a core dump.
  try {
    CLI11_PARSE(app, argc, argv);
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "larql: out of memory: an allocation failed (a model or request larger than this machine holds?)\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "larql: %s\n", e.what());
    return 1;
  }
  return 0;
}
