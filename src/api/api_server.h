// `larql api`: the OpenAI-compatible HTTP API over the local engine (its FFN local or on
// shards). GET /v1/models, POST /v1/completions and /v1/chat/completions (streamed as
// Server-Sent Events or whole), POST /tokenize and /detokenize (llama-server's), GET
// /health, GET /metrics. Up to `parallel` sequences
// decode together (BatchScheduler); the rest wait in a bounded queue, and 429 when it is full.
#pragma once

#include <functional>

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "api/batch_scheduler.h"
#include "infer/generate.h"
#include "api/chat_template.h"
#include "api/openai_request.h"
#include "infer/transformer.h"
#include "model/tokenizer.h"
#include "net/histogram.h"
#include "net/http_server.h"

namespace larql {

struct ApiOptions {
  std::string model_id;               // what /v1/models lists and responses name
  size_t ctx = 2048;                  // prompt + completion, per sequence
  size_t max_queue = 64;              // requests waiting beyond the running ones
  size_t parallel = 8;                // sequences decoding together
  std::optional<ChatFormat> chat_format;  // none: chat requests get a 400 naming --chat-template
  std::optional<SpeculativeOptions> speculative = {};  // --draft: every request's sequence drafts its own
  const Model* draft_model = nullptr;                  // --draft MODEL (else prompt lookup)
  bool key_required = false;  // --api-key is set (GET /health says so, for the chat page to ask for it)
  size_t prefill_chunk = 64;  // a sequence's prompt tokens per step
  size_t cache_bytes = 0;     // the prompt prefix cache's bound (BatchScheduler::Options); 0: off
  size_t fork_reach = SIZE_MAX;  // with layer_ranges: the shards' rewind_positions
  // Whole layers on session shards (--remote-layers): the ranges every step runs through,
  // and how many sequences they have replayed so far (for /metrics).
  std::vector<LayerRangeBackend*> layer_ranges = {};
  std::function<size_t()> session_replays = {};
};

// The body of an error in OpenAI's shape: {"error": {"message", "type", "param", "code"}}.
HttpReply openai_error_reply(const OpenAiError& e);
// The HTTP layer's own errors (404, 401, 413, malformed HTTP…) in that shape.
HttpReply openai_error_for(const Error& e);

class ApiServer {
 public:
  ApiServer(const Model& model, const Tokenizer* tokenizer, FfnBackend& ffn, ThreadPool& pool, ApiOptions options);
  std::vector<Route> routes();
  // The prefix cache's least recently used sequence goes (BatchScheduler::drop_cached_prefix).
  bool drop_cached_prefix() { return scheduler_.drop_cached_prefix(); }

 private:
  struct Prepared;  // a checked request, tokenized
  HttpReply complete(const HttpRequest& request, bool chat);
  std::variant<Prepared, OpenAiError> prepare(const CompletionRequest& r) const;
  nlohmann::json models() const;
  std::string metrics() const;
  HttpReply tokenize(const HttpRequest& request) const;
  HttpReply detokenize(const HttpRequest& request) const;
  // The vocabulary's trie for structured output, built at the first request that needs it;
  // for a required tool call, with the chat format's call marks spelled (ToolCallWords::marks).
  std::shared_ptr<const TokenTrie> token_trie(bool call_marks) const;

  const Model& model_;
  const Tokenizer* tokenizer_;
  Transformer transformer_;
  ApiOptions options_;
  BatchScheduler scheduler_;  // after transformer_: its engine thread stops first
  std::vector<int> end_of_turn_;  // the chat format's end-of-turn token, where the vocabulary has it
  std::vector<int> tool_wait_;    // and the token its model writes after tool calls (ToolCallWords::wait)
  mutable std::once_flag trie_once_[2];
  mutable std::shared_ptr<const TokenTrie> trie_[2];  // without, with the call marks
  std::atomic<uint64_t> next_id_{0};
  const int64_t created_;

  // Metrics (Prometheus text at /metrics).
  mutable std::mutex metrics_mutex_;
  std::map<std::string, uint64_t> requests_;  // by endpoint and status
  uint64_t prompt_tokens_ = 0, completion_tokens_ = 0;
  Histogram first_token_seconds_;  // from a request's arrival (queue included) to its first token
  Histogram token_gap_seconds_;    // between a sequence's tokens after the first, as the engine made them
};

}  // namespace larql
