// The body of POST /v1/completions and /v1/chat/completions, parsed and checked. What
// larql does not do is refused by name (best_of, tools…), never ignored.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "api/chat_template.h"
#include "constrain/json_schema.h"

namespace larql {

struct OpenAiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // empty: null
  std::string code;   // empty: null
};

struct CompletionRequest {
  bool chat = false;
  std::variant<std::string, std::vector<int>> prompt;  // completions
  std::vector<ChatMessage> messages;                   // chat
  std::optional<size_t> max_tokens;
  float temperature = 1.0f;  // OpenAI's default
  float top_p = 1.0f;
  size_t top_k = 0;                 // 0 (or -1 in the request): every token
  float min_p = 0.0f;
  float repetition_penalty = 1.0f;  // vLLM's and llama-server's
  float presence_penalty = 0.0f, frequency_penalty = 0.0f;
  std::map<int, float> logit_bias;  // token id → added to its logit (ids checked against the vocabulary later)
  std::optional<uint64_t> seed;
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  // Each token's log-probability and this many alternatives' (completions: logprobs N;
  // chat: logprobs true with top_logprobs N); unset: none.
  std::optional<size_t> top_logprobs;
  // Completions: the prompt's text before the completion, with its tokens' log-probabilities
  // when logprobs is set (max_tokens 0: the prompt alone, as evaluation harnesses score text).
  bool echo = false;
  size_t n = 1;  // choices, each its own sequence of the batch, sampled with seed + its index
  // response_format json_object or json_schema: what the text must be; null: plain text.
  std::shared_ptr<const JsonGrammar> grammar;
  // Chat tools: the definitions as sent (key order kept: templates print them), and which
  // may be called: none (the tools are left out of the prompt), auto (the model decides),
  // required (a call of one of them), or the one named.
  std::vector<nlohmann::ordered_json> tools;
  enum class ToolChoice { none, automatic, required, named } tool_choice = ToolChoice::none;
  std::string tool_name;  // named
};

// Parses `body`; `chat` selects the endpoint's schema.
std::variant<CompletionRequest, OpenAiError> parse_completion_request(const std::string& body, bool chat);

}  // namespace larql
