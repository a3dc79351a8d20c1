#include "infer/generate.h"

#include <algorithm>
#include <chrono>

#include "infer/lookup_draft.h"

namespace larql {

std::string_view stop_reason_name(StopReason r) {
  switch (r) {
    case StopReason::steps: return "steps";
    case StopReason::eos: return "eos";
    case StopReason::context: return "context";
  }
  return "steps";
}

namespace {

// Decoding with drafted tokens verified: the chosen token and the drafts go through one
// pass, a chain at positions [pos, pos + k] or, with several prompt-lookup continuations, a
// tree of them (draft_tree.h); a row's logits are those after its path. From row 0 down:
// greedy keeps the child whose token is the row's argmax, and the first row with no such
// child (or none at all) gives the next token, so the output is plain greedy decoding's.
// Sampling keeps a child or replaces them all by Sampler::verify's rule, so every token
// is distributed as plain sampling's (not the same draws: the verification takes its own).
// The kept path's cache entries move to their positions (keep_path); entries past them are
// overwritten by the next pass (attention never reads past a row's own path).
Status speculate(Transformer& model, const std::vector<int>& prompt, const GenerateOptions& options, std::vector<float>& logits,
                 const TokenCallback& on_token, GenerateResult& result) {
  const ModelConfig& c = model.config();
  const SpeculativeOptions& spec = *options.speculative;
  const bool greedy_only = options.sampler.temperature <= 0;
  Sampler sampler(options.sampler);
  std::vector<float> probs;
  const size_t V = c.vocab;
  // The token after row `row`'s path, and which of the candidates it keeps (-1: none).
  auto choose = [&](size_t row, std::span<const int> candidates, int& kept) {
    const std::span<float> logits_row{logits.data() + row * V, V};
    if (greedy_only) {
      const int next = argmax(logits_row);
      const auto it = std::find(candidates.begin(), candidates.end(), next);
      kept = it == candidates.end() ? -1 : int(it - candidates.begin());
      return next;
    }
    sampler.distribution(logits_row, probs);
    if (candidates.empty()) return sampler.draw(probs);
    const auto [token, which] = sampler.verify(probs, candidates);
    kept = which;
    return token;
  };
  std::vector<int> context = prompt;
  bool ended = false;
  auto emit = [&](int token) {
    if (!options.ignore_eos && std::find(c.eos_ids.begin(), c.eos_ids.end(), token) != c.eos_ids.end()) {
      result.stop = StopReason::eos;
      ended = true;
      return false;
    }
    result.generated.push_back(token);
    context.push_back(token);
    if (on_token) on_token(token);
    ended = result.generated.size() == options.max_new_tokens;
    return !ended;
  };
  size_t pos = prompt.size();
  DraftLength length(spec);
  if (!emit(sampler.sample(logits))) return Ok{};
  for (;;) {
    if (pos == c.context) {  // the token just chosen has no position left to be fed at
      result.stop = StopReason::context;
      return Ok{};
    }
    const DraftTree tree =
        sweep_drafts(context.back(), context, length, spec, spec.draft, c.context - pos - 1, options.max_new_tokens - result.generated.size());
    if (auto s = model.forward_tree(tree.tokens, tree.parents, pos, logits); !s) return s;
    ++result.passes;
    result.drafted += tree.drafted();
    const std::vector<size_t> path = walk_draft_tree(tree, choose, emit);
    const size_t kept = path.size() - 1;
    result.accepted += kept;
    if (ended) return Ok{};
    model.keep_path(path, pos);
    pos += kept + 1;
    length.after(tree.drafted(), kept);
  }
}

}  // namespace

DraftTree sweep_drafts(int first, std::span<const int> context, DraftLength& length, const SpeculativeOptions& spec,
                       const DraftFunction& propose, size_t positions, size_t tokens) {
  const bool repeats = !propose && length.stopped() && lookup_match_length(context, spec.max_ngram) >= 2;
  const size_t want = std::min({length.wanted(repeats), positions, tokens});
  std::vector<std::vector<int>> drafts;
  if (propose) drafts.assign(1, propose(context, want));
  else drafts = lookup_drafts(context, want, {spec.max_ngram, spec.branches});
  for (auto& draft : drafts) draft.resize(std::min(draft.size(), want));
  return DraftTree::build(first, drafts, std::min(positions, spec.max_draft) + 1);
}

Result<GenerateResult> generate(Transformer& model, const std::vector<int>& prompt, const GenerateOptions& options,
                                const TokenCallback& on_token) {
  using Clock = std::chrono::steady_clock;
  const ModelConfig& c = model.config();
  if (prompt.empty()) return make_error(ErrorCode::invalid_argument, "the prompt has no tokens");
  if (prompt.size() > c.context)
    return make_error(ErrorCode::invalid_argument, "the prompt has " + std::to_string(prompt.size()) +
                                                       " tokens; the model's context is " + std::to_string(c.context));
  GenerateResult result;
  Sampler sampler(options.sampler);
  std::vector<float> logits;
  auto start = Clock::now();
  if (options.cached >= prompt.size())
    return make_error(ErrorCode::invalid_argument, "a cached prefix of " + std::to_string(options.cached) + " positions leaves none of the " +
                                                       std::to_string(prompt.size()) + "-token prompt to run (the last one gives the logits)");
  const size_t chunk = options.prefill_chunk ? options.prefill_chunk : prompt.size();
  for (size_t pos = options.cached; pos < prompt.size(); pos += chunk)
    if (auto s = model.forward({prompt.data() + pos, std::min(chunk, prompt.size() - pos)}, pos, logits); !s) return s.error();
  result.prefill_seconds = std::chrono::duration<double>(Clock::now() - start).count();

  start = Clock::now();
  if (options.speculative && options.max_new_tokens > 0) {
    if (auto s = speculate(model, prompt, options, logits, on_token, result); !s) return s.error();
    result.decode_seconds = std::chrono::duration<double>(Clock::now() - start).count();
    return result;
  }
  size_t pos = prompt.size();
  while (result.generated.size() < options.max_new_tokens) {
    const int next = sampler.sample(logits);
    if (!options.ignore_eos && std::find(c.eos_ids.begin(), c.eos_ids.end(), next) != c.eos_ids.end()) {
      result.stop = StopReason::eos;
      break;
    }
    result.generated.push_back(next);
    if (on_token) on_token(next);
    if (result.generated.size() == options.max_new_tokens) break;
    if (pos == c.context) {  // the token just chosen has no position left to be fed at
      result.stop = StopReason::context;
      break;
    }
    const int fed[] = {next};
    if (auto s = model.forward(fed, pos, logits); !s) return s.error();
    ++result.passes;
    ++pos;
  }
  result.decode_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return result;
}

}  // namespace larql
