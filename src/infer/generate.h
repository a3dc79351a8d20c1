// The generation loop: one prefill pass over the prompt, then one token at a time.
#pragma once

#include <functional>
#include <string_view>
#include <vector>

#include "infer/sampler.h"
#include "infer/transformer.h"

namespace larql {

enum class StopReason { steps, eos, context, caller };
std::string_view stop_reason_name(StopReason r);

struct GenerateOptions {
  size_t max_new_tokens = 256;
  bool ignore_eos = false;
  SamplerOptions sampler = {};
  std::vector<int> stop_ids = {};  // end tokens besides the model's EOS ids (a chat format's end of turn)
};

struct GenerateResult {
  std::vector<int> generated;  // excludes the end token that stopped generation
  StopReason stop = StopReason::steps;
  double prefill_seconds = 0;
  double decode_seconds = 0;   // from the first generated token to the last
};

// Called with each generated token as soon as it is chosen; false stops generation there
// (StopReason::caller: a stop string seen, a client gone).
using TokenCallback = std::function<bool(int token)>;

Result<GenerateResult> generate(Transformer& model, const std::vector<int>& prompt, const GenerateOptions& options,
                                const TokenCallback& on_token = {});

}  // namespace larql
