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
#include "net/remote_layers.h"

namespace larql::cli {

struct FfnOptions {
  std::optional<std::string> ffn;
  std::optional<std::string> remote_layers;  // whole layers on session shards (PROTOCOL §13)
  std::optional<std::string> wire;
  std::optional<std::string> api_key;
  std::optional<std::string> ca_cert;
  int timeout_ms = 30000;
  double hedge_after_ms = 0;
  bool expert_rows = false;
  int session_wait_s = 30;  // --remote-layers: a new sequence's wait for room on full shards
};

void add_ffn_options(CLI::App* cmd, FfnOptions& o);
void add_hedge_option(CLI::App* cmd, FfnOptions& o);  // part of add_ffn_options, for commands that name the rest themselves
void add_expert_rows_option(CLI::App* cmd, FfnOptions& o);  // likewise

// A LocalFfn, or a connected RemoteFfn (then *remote points at it). Warnings go to stderr
// prefixed with `command`.
Result<std::unique_ptr<FfnBackend>> make_ffn_backend(const Model& model, ThreadPool& pool, const FfnOptions& o,
                                                    const std::string& command, RemoteFfn** remote);

// --remote-layers MAP: whole layer ranges on session shards. Part of add_ffn_options.
void add_remote_layers_option(CLI::App* cmd, FfnOptions& o);

// The session shards of --remote-layers, connected and checked against `model`; each new
// session holds up to `max_positions`. Warnings go to stderr prefixed with `command`.
Result<std::unique_ptr<RemoteLayers>> connect_remote_layers(const Model& model, const FfnOptions& o, size_t max_positions,
                                                            const std::string& command);

// "--draft-branches N: ..." when the draft shape cannot run over --remote-layers (chains only).
Status check_draft_for_sessions(const FfnOptions& o, size_t branches);

}  // namespace larql::cli
