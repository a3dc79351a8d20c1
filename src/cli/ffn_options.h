// The FFN-backend options `larql run` and `larql perplexity` share: local weights, or a
// remote grid (--ffn URL|MAP with --wire, --api-key, --ca-cert, --timeout-ms).
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <optional>
#include <string>

#include "infer/ffn_backend.h"
#include "kernels/thread_pool.h"
#include "model/model.h"
#include "net/remote_ffn.h"

namespace larql::cli {

struct FfnOptions {
  std::optional<std::string> ffn;
  std::optional<std::string> wire;
  std::optional<std::string> api_key;
  std::optional<std::string> ca_cert;
  int timeout_ms = 30000;
  double hedge_after_ms = 0;
  bool expert_rows = false;
};

void add_ffn_options(CLI::App* cmd, FfnOptions& o);
void add_hedge_option(CLI::App* cmd, FfnOptions& o);  // part of add_ffn_options, for commands that name the rest themselves
void add_expert_rows_option(CLI::App* cmd, FfnOptions& o);  // likewise

// A LocalFfn, or a connected RemoteFfn (then *remote points at it). Warnings go to stderr
// prefixed with `command`.
Result<std::unique_ptr<FfnBackend>> make_ffn_backend(const Model& model, ThreadPool& pool, const FfnOptions& o,
                                                    const std::string& command, RemoteFfn** remote);

}  // namespace larql::cli
