// The generation loop: one prefill pass over the prompt, then one token at a time; or, with
// speculative decoding, a few drafted tokens (a chain, or a tree of them) verified in one
// pass each sweep (greedy output identical to one token at a time: each row's logits are
// what its path alone gives; sampled output distributed as one token at a time's, by
// speculative sampling's rule).
#pragma once

#include <algorithm>
#include <functional>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "infer/draft_tree.h"
#include "infer/sampler.h"
#include "infer/transformer.h"

namespace larql {

enum class StopReason { steps, eos, context };
std::string_view stop_reason_name(StopReason r);

// Drafts from elsewhere than prompt lookup (a draft model, a test's): up to k tokens
// continuing the context.
using DraftFunction = std::function<std::vector<int>(std::span<const int> context, size_t k)>;

// Speculative decoding with prompt-lookup drafts (lookup_draft.h), greedy or sampled.
struct SpeculativeOptions {
  size_t max_draft = 8;     // drafted tokens per sweep at most
  size_t max_ngram = 3;     // the longest context tail the lookup matches
  bool adaptive = true;     // the draft length follows the recent acceptance (down to 0, probing back)
  size_t probe_every = 16;  // with a draft length of 0: try one drafted token after this many tokens (more while they miss)
  // Prompt lookup: up to this many distinct continuations a sweep, verified together as a
  // tree of drafts (their shared prefixes once) of at most max_draft + 1 rows; 1: a chain.
  size_t branches = 1;
  // Up to k tokens continuing the context; empty: prompt lookup (lookup_draft.h). Tests
  // give drafts that are wrong by construction.
  DraftFunction draft = {};
};

// The adaptive draft length (SpeculativeOptions::adaptive). Until a sweep keeps a draft,
// nothing says the drafts are any good and, on a CPU, every drafted row costs (a pass of
// 9 rows of a Q4_K_M 0.85B model on a Zen 2 costs several of one row): the first sweep
// drafts half of max_draft and each miss halves it. Back to max_draft after every sweep
// that kept a draft (over a network a verified row costs only its bytes), one shorter after
// a miss at the first draft (halving there lost a third of the kept drafts on the demo
// model, whose hits come between misses), so that drafts never right fall to none. From
// none, one draft after probe_every tokens, the wait doubling while the probes miss (to at
// most 16 times probe_every) and back to probe_every after a hit; and half of max_draft
// whenever the caller says the text repeats (prompt lookup matched a tail of two tokens or
// more: a sequence whose first drafts all missed still gets its repeats guessed).
class DraftLength {
 public:
  explicit DraftLength(const SpeculativeOptions& options)
      : options_(&options), k_(options.adaptive ? (options.max_draft + 1) / 2 : options.max_draft),
        probe_wait_(options.probe_every) {}
  // The drafts to ask for now (before the caller's limits: positions, tokens wanted).
  size_t wanted(bool repeats = false) {
    if (k_ == 0 && repeats) return (options_->max_draft + 1) / 2;
    if (k_ == 0 && ++since_probe_ >= probe_wait_) {
      since_probe_ = 0;
      return 1;
    }
    return k_;
  }
  bool stopped() const { return k_ == 0; }  // drafting only when probing, or when the text repeats
  void after(size_t drafted, size_t kept) {
    if (!options_->adaptive || drafted == 0) return;
    if (kept > 0) {
      k_ = options_->max_draft;
      probe_wait_ = options_->probe_every;
      kept_any_ = true;
    } else if (k_ > 0) {
      k_ = kept_any_ ? k_ - 1 : k_ / 2;
    } else {
      probe_wait_ = std::min(2 * probe_wait_, 16 * options_->probe_every);
    }
  }

 private:
  const SpeculativeOptions* options_;
  size_t k_, probe_wait_, since_probe_ = 0;
  bool kept_any_ = false;
};

// A sweep's tree of drafts: `first` (the token just chosen) and under it as many drafts as
// `length` wants, from `propose` where given, else prompt lookup's continuations of
// `context` (whose repeats bring drafting back from none); within the `positions` after
// first's and the `tokens` still wanted, and no more rows than a chain of max_draft (its
// bytes over a link stay a chain's).
DraftTree sweep_drafts(int first, std::span<const int> context, DraftLength& length, const SpeculativeOptions& spec,
                       const DraftFunction& propose, size_t positions, size_t tokens);

// The prompt positions a pass takes at most by default (GenerateOptions::prefill_chunk).
inline constexpr size_t kPrefillChunk = 2048;

struct GenerateOptions {
  size_t max_new_tokens = 256;
  bool ignore_eos = false;
  SamplerOptions sampler = {};
  std::optional<SpeculativeOptions> speculative = {};
  // The prompt's positions per pass: a long prompt runs in pieces (the same logits), so that
  // its pass's buffers and the sliding layers' caches stay bounded; 0: one pass.
  size_t prefill_chunk = kPrefillChunk;
  // The prompt's first positions already in the transformer's cache (Transformer::set_cache,
  // a prompt cache): the prefill starts there. At most the prompt's length − 1.
  size_t cached = 0;
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
