// Generated tokens' log-probabilities in OpenAI's two shapes: chat's `logprobs.content`
// entries ({token, logprob, bytes, top_logprobs}) and completions' legacy object (tokens,
// token_logprobs, top_logprobs as {text: logprob}, text_offset).
#pragma once

#include <nlohmann/json.hpp>
#include <span>

#include "infer/sampler.h"
#include "model/tokenizer.h"

namespace larql {

// Chat: the entries of `logprobs.content`, one per token.
nlohmann::json chat_logprobs(const Tokenizer& tokenizer, std::span<const TokenLogprobs> tokens);

// Completions: the object for these tokens; `text_offset` is where the first one's text
// starts in the completion, and is advanced past the last one's.
nlohmann::json completion_logprobs(const Tokenizer& tokenizer, std::span<const TokenLogprobs> tokens, size_t& text_offset);

}  // namespace larql
