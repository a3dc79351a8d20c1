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

// Decoding with drafted tokens verified: the chosen token and k drafts go through one pass
// at positions [pos, pos + k]; row i's logits are those after the row's token. Greedy: the
// drafts are kept while each equals row i - 1's argmax, and the first row whose argmax
// differs (or the last) gives the next token, so the output is plain greedy decoding's.
// Sampling: each draft is kept or replaced by Sampler::verify's rule, so every token is
// distributed as plain sampling's (not the same draws: the verification takes its own).
// Cache entries past the kept ones are overwritten by the next pass (attention never
// reads past a row's own position).
Status speculate(Transformer& model, const std::vector<int>& prompt, const GenerateOptions& options, std::vector<float>& logits,
                 const TokenCallback& on_token, GenerateResult& result) {
  const ModelConfig& c = model.config();
  const SpeculativeOptions& spec = *options.speculative;
  const bool greedy_only = options.sampler.temperature <= 0;
  Sampler sampler(options.sampler);
  std::vector<float> probs;
  // Whether row's choice is the draft; when not, `next` is the token chosen instead.
  auto keeps = [&](std::span<float> row, int drafted, int& next) {
    if (greedy_only) return (next = argmax(row)) == drafted;
    sampler.distribution(row, probs);
    const auto [token, kept] = sampler.verify(probs, drafted);
    next = token;
    return kept;
  };
  auto choose = [&](std::span<float> row) {
    if (greedy_only) return argmax(row);
    sampler.distribution(row, probs);
    return sampler.draw(probs);
  };
  std::vector<int> context = prompt;
  size_t pos = prompt.size();
  DraftLength length(spec);
  int next = sampler.sample(logits);
  std::vector<int> fed;
  for (;;) {
    if (!options.ignore_eos && std::find(c.eos_ids.begin(), c.eos_ids.end(), next) != c.eos_ids.end()) {
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
    // The drafts: no more than the positions and the tokens still wanted allow.
    const size_t want = std::min({length.wanted(), c.context - pos - 1, options.max_new_tokens - result.generated.size()});
    fed.assign(1, next);
    std::vector<int> draft = spec.draft ? spec.draft(context, want) : lookup_draft(context, want, {spec.max_ngram});
    draft.resize(std::min(draft.size(), want));
    fed.insert(fed.end(), draft.begin(), draft.end());
    if (auto s = model.forward_logits(fed, pos, 0, logits); !s) return s;
    ++result.passes;
    result.drafted += draft.size();
    // Keep the drafts the target agrees with, emitting each as plain decoding would.
    const size_t V = c.vocab;
    size_t kept = 0;
    bool replaced = false;  // the last row checked chose another token (next)
    for (; kept < draft.size(); ++kept) {
      std::span<float> row(logits.data() + kept * V, V);
      if (!keeps(row, draft[kept], next)) {
        replaced = true;
        break;
      }
      const int token = draft[kept];
      if (!options.ignore_eos && std::find(c.eos_ids.begin(), c.eos_ids.end(), token) != c.eos_ids.end()) {
        result.stop = StopReason::eos;
        result.accepted += kept;
        return Ok{};
      }
      result.generated.push_back(token);
      context.push_back(token);
      if (on_token) on_token(token);
      if (result.generated.size() == options.max_new_tokens) {
        result.accepted += kept + 1;
        return Ok{};
      }
    }
    result.accepted += kept;
    if (!replaced) next = choose({logits.data() + kept * V, V});  // every draft kept: the row after the last
    pos += kept + 1;
    length.after(draft.size(), kept);
  }
}

}  // namespace

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
