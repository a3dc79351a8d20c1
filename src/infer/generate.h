// The generation loop: one prefill pass over the prompt, then one token at a time; or, with
// speculative decoding, a few drafted tokens verified in one pass each sweep (greedy output
// identical to one token at a time: each row's logits are what that position alone gives;
// sampled output distributed as one token at a time's, by speculative sampling's rule).
#pragma once

#include <functional>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "infer/sampler.h"
#include "infer/transformer.h"

namespace larql {

enum class StopReason { steps, eos, context };
std::string_view stop_reason_name(StopReason r);

// Speculative decoding with prompt-lookup drafts (lookup_draft.h), greedy or sampled.
struct SpeculativeOptions {
  size_t max_draft = 8;     // drafted tokens per sweep at most
  size_t max_ngram = 3;     // the longest context tail the lookup matches
  bool adaptive = true;     // the draft length follows the recent acceptance (down to 0, probing back)
  size_t probe_every = 16;  // with a draft length of 0: try one drafted token every this many tokens
  // Up to k tokens continuing the context; empty: prompt lookup (lookup_draft.h). Tests
  // give drafts that are wrong by construction.
  std::function<std::vector<int>(std::span<const int> context, size_t k)> draft = {};
};

// The adaptive draft length (SpeculativeOptions::adaptive): back to max_draft after a sweep
// that kept a draft (a verified row costs little beside the pass: over a network only its
// bytes); one shorter after a miss at the first draft, so that drafts never right fall to
// none after max_draft sweeps and then cost only the probes (halving instead lost a third
// of the kept drafts on the demo model, whose hits come between misses); from none, one
// draft every probe_every tokens.
class DraftLength {
 public:
  explicit DraftLength(const SpeculativeOptions& options) : options_(&options), k_(options.max_draft) {}
  // The drafts to ask for now (before the caller's limits: positions, tokens wanted).
  size_t wanted() {
    if (k_ == 0 && ++since_probe_ >= options_->probe_every) {
      since_probe_ = 0;
      return 1;
    }
    return k_;
  }
  void after(size_t drafted, size_t kept) {
    if (options_->adaptive && drafted > 0) k_ = kept > 0 ? options_->max_draft : k_ > 0 ? k_ - 1 : 0;
  }

 private:
  const SpeculativeOptions* options_;
  size_t k_, since_probe_ = 0;
};

struct GenerateOptions {
  size_t max_new_tokens = 256;
  bool ignore_eos = false;
  SamplerOptions sampler = {};
  std::optional<SpeculativeOptions> speculative = {};
};

struct GenerateResult {
  std::vector<int> generated;  // excludes the end token that stopped generation
  StopReason stop = StopReason::steps;
  double prefill_seconds = 0;
  double decode_seconds = 0;   // from the first generated token to the last
  size_t passes = 0;           // forward passes after the prefill (a sweep each, with speculation)
  size_t drafted = 0, accepted = 0;  // speculative tokens proposed and kept
};

// Called with each generated token as soon as it is chosen.
using TokenCallback = std::function<void(int token)>;

Result<GenerateResult> generate(Transformer& model, const std::vector<int>& prompt, const GenerateOptions& options,
                                const TokenCallback& on_token = {});

}  // namespace larql
