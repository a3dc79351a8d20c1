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
  // Which of the candidates the row keeps (their index, or -1); `next` is the token chosen.
  auto keeps = [&](std::span<float> row, std::span<const int> candidates, int& next) {
    if (greedy_only) {
      next = argmax(row);
      const auto it = std::find(candidates.begin(), candidates.end(), next);
      return it == candidates.end() ? -1 : int(it - candidates.begin());
    }
    sampler.distribution(row, probs);
    const auto [token, kept] = sampler.verify(probs, candidates);
    next = token;
    return kept;
  };
  auto choose = [&](std::span<float> row) {
    if (greedy_only) return argmax(row);
    sampler.distribution(row, probs);
    return sampler.draw(probs);
  };
  auto is_eos = [&](int token) {
    return !options.ignore_eos && std::find(c.eos_ids.begin(), c.eos_ids.end(), token) != c.eos_ids.end();
  };
  std::vector<int> context = prompt;
  size_t pos = prompt.size();
  DraftLength length(spec);
  int next = sampler.sample(logits);
  std::vector<int> candidates;
  std::vector<size_t> path;
  for (;;) {
    if (is_eos(next)) {
      result.stop = StopReason::eos;
      return Ok{};
    }
    result.generated.push_back(next);
    context.push_back(next);
    if (on_token) on_token(next);
    if (result.generated.size() == options.max_new_tokens) return Ok{};
    if (pos == c.context) {
      result.stop = StopReason::context;
      return Ok{};
    }
    const DraftTree tree =
        sweep_drafts(next, context, length, spec, spec.draft, c.context - pos - 1, options.max_new_tokens - result.generated.size());
    if (auto s = model.forward_tree(tree.tokens, tree.parents, pos, logits); !s) return s;
    ++result.passes;
    result.drafted += tree.drafted();
    // Down the tree from row 0 while a child is kept, emitting each as plain decoding would.
    const size_t V = c.vocab;
    path.assign(1, 0);
    bool replaced = false;  // the last row checked chose a token none of its children has (next)
    for (;;) {
      const std::vector<size_t> children = tree.children(path.back());
      if (children.empty()) break;
      candidates.clear();
      for (size_t child : children) candidates.push_back(tree.tokens[child]);
      const int kept = keeps({logits.data() + path.back() * V, V}, candidates, next);
      if (kept < 0) {
        replaced = true;
        break;
      }
      const int token = candidates[size_t(kept)];
      if (is_eos(token)) {
        result.stop = StopReason::eos;
        result.accepted += path.size() - 1;
        return Ok{};
      }
      path.push_back(children[size_t(kept)]);
      result.generated.push_back(token);
      context.push_back(token);
      if (on_token) on_token(token);
      if (result.generated.size() == options.max_new_tokens) {
        result.accepted += path.size() - 1;
        return Ok{};
      }
    }
    const size_t kept = path.size() - 1;
    result.accepted += kept;
    if (!replaced) next = choose({logits.data() + path.back() * V, V});  // a leaf kept: the row after it
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
  if (auto s = model.forward(prompt, 0, logits); !s) return s.error();
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
