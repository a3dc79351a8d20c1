// `larql bench`: what each wire format costs in accuracy, bytes and time. The reference
// trajectory is greedy decoding with f32 on the wire (or the local FFN with --local, when
// remote f32 is itself checked to be bit-identical). Every format is then run teacher-
// forced along the reference tokens, so one early difference does not cascade, and once
// free-running to find where its greedy path first leaves the reference.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "eval/link_model.h"
#include "eval/range_recorder.h"
#include "infer/generate.h"
#include "model/model.h"
#include "wire/encoding.h"

namespace larql {

struct WireBenchOptions {
  std::vector<std::vector<int>> prompts;
  size_t steps = 50;
  size_t k = 5;
  std::vector<wire::Encoding> formats{wire::Encoding::f32, wire::Encoding::f16, wire::Encoding::q8, wire::Encoding::i8};
  bool local_reference = false;
  std::string ffn_spec;
  bool sessions = false;  // ffn_spec is a --remote-layers map: whole layers on session shards
  std::optional<std::string> api_key, ca_cert;
  bool expert_rows = false;  // RemoteFfnOptions::expert_rows
  size_t threads = 2;
  std::vector<Link> links = what_if_links();  // projected tokens/s for each
  // --draft: also decode each prompt speculatively through the shards, in the last format
  // listed, and report what a token costs then (draft_name says which draft).
  std::optional<SpeculativeOptions> speculative = {};
  std::string draft_name;
};

struct FormatReport {
  wire::Encoding wire;
  bool exact = true;  // every step's logits bit-identical to the reference
  double top1_agreement = 0, topk_agreement = 0;
  float max_abs_logit_diff = 0;
  double mean_kl = 0, max_kl = 0;
  std::optional<size_t> first_divergence_step;
  double bytes_sent_per_token = 0, bytes_received_per_token = 0, round_trips_per_token = 0;  // bodies
  double head_bytes_sent_per_token = 0, head_bytes_received_per_token = 0;                 // HTTP heads
  double ms_per_token = 0, server_ms_per_token = 0, transport_ms_per_token = 0, local_ms_per_token = 0;
  size_t f32_fallbacks = 0;
  std::vector<double> kl_per_step;
  std::vector<bool> topk_per_step;
  std::map<std::string, double> projected_tokens_per_second;
};

// Greedy speculative decoding through the shards: the drafts kept, the tokens each pass gave
// (a pass costs a round trip per layer), and per decoded token (prefill excluded) the
// traffic and projected tokens/s as for a format.
struct SpeculativeReport {
  std::string draft;
  size_t tokens = 0, passes = 0, drafted = 0, accepted = 0;  // decoded tokens, passes after the prefill
  bool same_ids = true;  // as plain greedy decoding in the same format
  FormatReport cost;     // wire, bytes, round trips, times and projections per decoded token
};

struct WireBenchReport {
  std::string model;
  size_t steps = 0, k = 0;
  size_t total_steps = 0;  // teacher-forced steps compared, over all prompts
  bool local_reference = false;
  bool remote_f32_exact = true;
  std::vector<FormatReport> formats;
  std::vector<LayerValueRange> layers;
  std::vector<Link> links;
  std::optional<SpeculativeReport> speculative;
};

Result<WireBenchReport> run_wire_bench(const Model& model, const WireBenchOptions& options);

}  // namespace larql
