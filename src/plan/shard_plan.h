// Laying a model's FFN over machines: contiguous layer ranges (or, for a mixture-of-experts
// model, contiguous expert ranges of every layer) sized to each machine's memory, so that the
// fullest machine is as empty as it can be. With replicas, each run of that many machines in
// the list holds the same range. Sizes come from model_sizes.h; nothing is loaded.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/errors.h"
#include "plan/model_sizes.h"

namespace larql {

struct Machine {
  std::string name;  // its host name, as the router and clients reach it
  uint64_t bytes = 0;
};

// "a=24G,b=16G": names and memory (K, M, G, T: powers of 1024; a plain number is bytes).
Result<std::vector<Machine>> parse_machines(std::string_view spec);
// "24G" → bytes.
Result<uint64_t> parse_bytes(std::string_view text);

struct PlanOptions {
  size_t replicas = 1;
  double headroom = 0.10;                    // of each machine's memory left free
  uint64_t process_bytes = uint64_t(256) << 20;  // a shard process's own memory besides weights
  enum class Split { automatic, layers, experts } split = Split::automatic;  // automatic: experts for MoE models
  // Layer-range sessions (PROTOCOL §13): each shard holds its layers whole (attention too)
  // and a KV budget of `session_sequences` sequences of `session_positions` positions; ranges
  // never split a KV-sharing group.
  bool sessions = false;
  size_t session_positions = 4096, session_sequences = 8;
};

struct ShardAssignment {
  std::vector<std::string> machines;  // the machines holding it (its replicas)
  size_t first = 0, last = 0;         // layers, or experts (by_experts), inclusive
  bool dense = false;                 // by_experts: also the dense MLPs
  uint64_t bytes = 0;                 // FFN weights it holds (sessions: all its layers' weights and its KV budget)
  uint64_t usable = 0;                // what its smallest machine can hold for weights
  uint64_t kv_bytes = 0;              // sessions: the KV budget (--session-kv-bytes)
};

struct ShardPlan {
  bool by_experts = false;
  std::vector<ShardAssignment> shards;
  std::vector<std::string> unused;  // machines the model did not need
};

Result<ShardPlan> plan_shards(const ModelSizes& sizes, const std::vector<Machine>& machines, const PlanOptions& options);

// Where a session shard's range may begin: layer c, unless a layer at or after c reads the
// cache of a layer before it (Gemma 4 E's KV sharing). [0] is always true.
std::vector<bool> session_cuts(const ModelSizes& sizes);

// The map for `larql router --shards` (and `--ffn`): "0-2=http://a:9001|http://c:9001,…", or
// by experts "0-27/0-63=http://a:9001,…,0-27/dense=http://a:9001".
std::string shard_map(const ShardPlan& plan, const ModelSizes& sizes, int port);

}  // namespace larql
