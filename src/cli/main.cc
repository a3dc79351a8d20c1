// larql: one binary, one subcommand per role (see README). Argument parsing only here;
// the work lives in the libraries.
#include <CLI/CLI.hpp>
#include <cstdio>
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

int main(int argc, char** argv) {
  CLI::App app{"larql: transformer inference with remote FFN shards (ADR-0009 wire format)"};
  app.set_version_flag("--version", std::string("larql 0.1.0 (wire kernels: ") + larql::wire::best_kernels().name + ")");
  app.require_subcommand(1);
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
