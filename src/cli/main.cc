// larql: one binary, one subcommand per role (see README). Argument parsing only here;
// the work lives in the libraries.
#include <CLI/CLI.hpp>
#include <iostream>

#include "wire/kernels.h"

int main(int argc, char** argv) {
  CLI::App app{"larql: transformer inference with remote FFN shards (ADR-0009 wire format)"};
  app.set_version_flag("--version", std::string("larql 0.1.0 (wire kernels: ") + larql::wire::best_kernels().name + ")");
  app.require_subcommand(0, 1);
  CLI11_PARSE(app, argc, argv);
  if (app.get_subcommands().empty()) std::cout << app.help();
  return 0;
}
