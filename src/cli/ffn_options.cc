#include "cli/number_checks.h"
#include "cli/ffn_options.h"

#include <cstdlib>
#include <iostream>

#include "infer/local_ffn.h"
#include "wire/wire_config.h"

namespace larql::cli {

void add_ffn_options(CLI::App* cmd, FfnOptions& o) {
  cmd->add_option("--ffn", o.ffn, "remote FFN: a URL (router or all-layer shard) or \"0-1=URL|URL,2-3=URL\"");
  cmd->add_option("--wire", o.wire, "wire format with --ffn: f32, f16 (default), q8 or i8; beats LARQL_F16_WIRE/LARQL_Q8_WIRE/LARQL_I8_WIRE");
  cmd->add_option("--api-key", o.api_key, "bearer key for the shards (also LARQL_API_KEY)");
  cmd->add_option("--ca-cert", o.ca_cert, "CA certificate (PEM) for https:// shards with a private CA");
  cmd->add_option("--timeout-ms", o.timeout_ms, "per-call timeout with --ffn")->capture_default_str()->check(positive());
  add_hedge_option(cmd, o);
  add_expert_rows_option(cmd, o);
  add_remote_layers_option(cmd, o);
}

void add_remote_layers_option(CLI::App* cmd, FfnOptions& o) {
  auto* layers = cmd->add_option("--remote-layers", o.remote_layers,
                                 "whole layers on session shards (larql serve --sessions): \"0-15=URL|URL,16-31=URL\"; a token "
                                 "costs one round trip per range instead of one per layer, the shards keeping the KV cache");
  if (auto* ffn = cmd->get_option_no_throw("--ffn")) layers->excludes(ffn);
  cmd->add_option("--session-wait-s", o.session_wait_s,
                  "with --remote-layers: while every replica of a range is full (503), how long a new sequence waits for "
                  "room before it fails")
      ->capture_default_str()
      ->check(non_negative());
}

Result<std::unique_ptr<RemoteLayers>> connect_remote_layers(const Model& model, const FfnOptions& o, size_t max_positions,
                                                            const std::string& command) {
  auto wire = wire::client_wire(o.wire, wire::process_env());
  if (!wire) return wire.error();
  RemoteLayersOptions ro{*o.remote_layers, *wire, o.api_key, o.ca_cert, o.timeout_ms, max_positions, std::chrono::seconds(o.session_wait_s)};
  if (!ro.api_key)
    if (const char* key = std::getenv("LARQL_API_KEY"); key && *key) ro.api_key = key;
  std::vector<std::string> warnings;
  auto connected = RemoteLayers::connect(model, ro, &warnings);
  for (const auto& w : warnings) std::cerr << command << ": warning: " << w << "\n";
  return connected;
}

Status check_draft_for_sessions(const FfnOptions& o, size_t branches) {
  if (o.remote_layers && branches > 1)
    return make_error(ErrorCode::invalid_argument, "--draft-branches " + std::to_string(branches) +
                                                       ": over --remote-layers a pass verifies one chain of drafts (PROTOCOL "
                                                       "§13 v1.2 has no draft trees); use --draft-branches 1");
  return Ok{};
}

void add_hedge_option(CLI::App* cmd, FfnOptions& o) {
  cmd->add_option("--hedge-after-ms", o.hedge_after_ms,
                  "with --ffn replicas (\"0-5=URL|URL\"): a call the first has not answered within this many ms also goes "
                  "to the second; the first answer wins (0: off)")
      ->check(non_negative());
}

void add_expert_rows_option(CLI::App* cmd, FfnOptions& o) {
  cmd->add_flag("--expert-rows", o.expert_rows,
                "with --ffn on a mixture-of-experts model: ask expert shards for each expert's rows and sum them here "
                "(f32: bit-identical to local for any split of the experts) instead of weighted sums (fewer bytes)");
}

Result<std::unique_ptr<FfnBackend>> make_ffn_backend(const Model& model, ThreadPool& pool, const FfnOptions& o,
                                                    const std::string& command, RemoteFfn** remote) {
  *remote = nullptr;
  if (!o.ffn) return std::unique_ptr<FfnBackend>(std::make_unique<LocalFfn>(model, pool));
  auto wire = wire::client_wire(o.wire, wire::process_env());
  if (!wire) return wire.error();
  RemoteFfnOptions ro{*o.ffn, *wire, o.api_key, o.ca_cert, o.timeout_ms, o.hedge_after_ms, o.expert_rows};
  if (!ro.api_key)
    if (const char* key = std::getenv("LARQL_API_KEY"); key && *key) ro.api_key = key;
  std::vector<std::string> warnings;
  auto connected = RemoteFfn::connect(model, ro, &warnings);
  for (const auto& w : warnings) std::cerr << command << ": warning: " << w << "\n";
  if (!connected) return connected.error();
  *remote = connected->get();
  return std::unique_ptr<FfnBackend>(std::move(*connected));
}

}  // namespace larql::cli
