#include "infer/generate.h"

#include <algorithm>
#include <chrono>

namespace larql {

std::string_view stop_reason_name(StopReason r) {
  switch (r) {
    case StopReason::steps: return "steps";
    case StopReason::eos: return "eos";
    case StopReason::context: return "context";
  }
  return "steps";
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
    ++pos;
  }
  result.decode_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return result;
}

}  // namespace larql
