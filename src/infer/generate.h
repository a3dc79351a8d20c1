// The generation loop: one prefill pass over the prompt, then one token at a time.
#pragma once

#include <functional>
#include <string_view>
#include <vector>

#include "infer/sampler.h"
#include "infer/transformer.h"

namespace larql {

enum class StopReason { steps, eos, context };
std::string_view stop_reason_name(StopReason r);

struct GenerateOptions {
  size_t max_new_tokens = 256;
  bool ignore_eos = false;
  SamplerOptions sampler = {};
};

struct GenerateResult {
  std::vector<int> generated;  // excludes the end token that stopped generation
  StopReason stop = StopReason::steps;
  double prefill_seconds = 0;
  double decode_seconds = 0;   // from the first generated token to the last
};

// Called with each generated token as soon as it is chosen.
using TokenCallback = std::function<void(int token)>;

Result<GenerateResult> generate(Transformer& model, const std::vector<int>& prompt, const GenerateOptions& options,
                                const TokenCallback& on_token = {});

}  // namespace larql
