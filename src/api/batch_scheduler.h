// Continuous batching: one engine thread runs every active sequence together, a step at a
// time. Each step is one Transformer::forward_batch — attention per sequence against its
// own KV cache, each layer's FFN once for all their rows (over the wire: one request per
// layer per step, whatever the number of sequences). New requests join at step
// boundaries; a long prompt is prefilled in chunks beside the others' decode steps. The
// kernels are row-wise exact, so a sequence's tokens do not depend on what runs beside it.
//
// Requests beyond `parallel` wait in arrival order, at most `max_waiting` of them. The
// connection thread of each request reads its tokens from a Job and cancels it when its
// client leaves or a stop string ends it; the engine drops it at the next step.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "api/prefix_cache.h"
#include "base/errors.h"
#include "constrain/token_mask.h"
#include "infer/draft_tree.h"
#include "infer/generate.h"
#include "infer/model_draft.h"
#include "infer/sampler.h"
#include "infer/transformer.h"

namespace larql {

struct JobRequest {
  std::vector<int> prompt;
  size_t max_tokens = 16;
  SamplerOptions sampler;
  std::vector<int> stop_ids;  // besides the model's EOS ids
  std::optional<size_t> top_logprobs;  // set: each token's log-probability and this many alternatives'
  bool prompt_logprobs = false;        // with top_logprobs: the prompt's tokens' too (max_tokens may be 0)
  // Structured output: the text follows this grammar, token by token over the vocabulary's
  // trie; the choice ends (eos) when the value closes.
  std::shared_ptr<const JsonGrammar> grammar = nullptr;
  std::shared_ptr<const TokenTrie> trie = nullptr;
};

// One request's side of the engine: the tokens it generated, then how it ended.
class Job {
 public:
  enum class End { none, eos, length, error };
  struct Event {
    std::optional<int> token;  // a generated token, or the end
    End end = End::none;
    std::optional<Error> error = {};  // End::error: what went wrong (e.g. a shard unreachable)
    std::optional<TokenLogprobs> logprobs = {};  // the token's, when the request asked for them
    // Once the prompt is in, before any token: its tokens' log-probabilities from the second on.
    std::optional<std::vector<TokenLogprobs>> prompt_logprobs = {};
    std::chrono::steady_clock::time_point at = {};  // when the engine made it (set by push)
  };
  // Waits (up to `wait`) for the next event; nullopt when none came.
  std::optional<Event> next(std::chrono::milliseconds wait);
  // The client left, or a stop string ended it: the engine drops it at the next step.
  void cancel() { cancelled_ = true; }
  bool cancelled() const { return cancelled_; }
  // How many of the prompt's first tokens the prefix cache gave (final before the first event).
  size_t cached_tokens() const { return cached_tokens_; }

 private:
  friend class BatchScheduler;
  void push(Event e);

  JobRequest request_;
  std::chrono::steady_clock::time_point arrived_;
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<Event> events_;
  std::atomic<bool> cancelled_ = false;
  std::atomic<size_t> cached_tokens_ = 0;
  // Engine-side state (the engine thread only).
  bool started_ = false;  // its prompt's cached prefix is looked up and in its cache
  KvCache cache_;
  std::optional<Sampler> sampler_;
  // No room on the shards for its sessions: not in a step before this (BatchScheduler::admit).
  std::chrono::steady_clock::time_point room_retry_at_{};
  size_t prefilled_ = 0;    // prompt tokens in the cache
  std::vector<TokenLogprobs> prompt_logprobs_;  // gathered chunk by chunk, when asked for
  size_t generated_ = 0;
  int last_token_ = -1;     // fed at the next decode step
  std::optional<JsonMatcher> matcher_;  // structured output: the text so far
  std::vector<uint8_t> allowed_;        // structured output: this step's tokens
  // The tokens so far, prompt and generated (what prompt lookup matches, what the prefix
  // cache keeps). Speculative decoding: this step's last token with its drafts under it (a
  // chain, or a tree of lookup's continuations) and how many drafts the next step asks for.
  std::vector<int> context_;
  DraftTree fed_;
  std::optional<DraftLength> draft_length_;
  std::unique_ptr<ModelDraft> model_draft_;  // with a draft model: this sequence's (its own KV cache)
  std::vector<float> probs_;
  std::vector<float> raw_;  // a row's logits before sampling shaped them (log-probabilities)
};

// The prompt rows a step takes when no sequence in it decodes: a long prompt alone comes in
// few steps (each a round trip per layer through remote shards), as `larql run`'s passes.
inline constexpr size_t kPrefillRowsAlone = kPrefillChunk;

class BatchScheduler {
 public:
  struct Options {
    size_t parallel = 8;        // sequences per step
    size_t max_waiting = 64;    // beyond the active ones; more: refused
    // Prompt tokens per sequence per step while other sequences decode (their next tokens
    // wait for the step); in a step where none does, the prompts share kPrefillRowsAlone,
    // except those scored (echo with logprobs), whose rows each bring the vocabulary's logits.
    size_t prefill_chunk = 64;
    size_t ctx = 2048;          // positions per sequence
    // Speculative decoding (prompt lookup): each decoding sequence brings its last token and
    // its drafts to the step, verified row by row (greedy output as without; sampled output
    // distributed as without). Not for structured output.
    std::optional<SpeculativeOptions> speculative = {};
    // With speculative: drafts from this model instead of prompt lookup, each sequence with
    // its own KV cache, run by the engine thread on `draft_pool` between steps.
    const Model* draft_model = nullptr;
    ThreadPool* draft_pool = nullptr;
    // The prefix cache's bound in bytes (PrefixCache): finished sequences' keys and values,
    // from which a prompt that starts the same way continues. 0: none kept or looked up.
    size_t cache_bytes = 0;
    // Where the layers run on session shards: how far back of a kept sequence's end a
    // prompt may continue it (the shards' rewind_positions).
    size_t fork_reach = SIZE_MAX;
  };
  struct Stats {
    size_t waiting = 0, active = 0, steps = 0;
    size_t drafted = 0, accepted = 0;  // speculative tokens proposed and kept
    size_t kv_cache_bytes = 0;         // what the active sequences' caches hold, after the last step
    PrefixCache::Stats prefix_cache;   // after the last step
  };

  BatchScheduler(Transformer& transformer, Options options);
  ~BatchScheduler();  // finishes the engine thread; jobs still active end with an error

  // Queues a request; nullptr when max_waiting requests are already waiting.
  std::shared_ptr<Job> submit(JobRequest request);
  // Queues several at once (the choices of one request): they join the same step when the
  // batch has room, so that over session shards the later ones fork the first's prefill.
  // Empty when they do not all fit the queue.
  std::vector<std::shared_ptr<Job>> submit_together(std::vector<JobRequest> requests);
  Stats stats() const;
  // Lets the least recently used kept prefix go (its sessions, where the layers run on
  // shards). On the engine thread only: for a shard that answers 503 during a step.
  bool drop_cached_prefix() { return prefix_cache_.drop_least_recent(); }

 private:
  std::shared_ptr<Job> make_job(JobRequest request) const;
  void run();
  // One step over the active jobs.
  void step(std::vector<std::shared_ptr<Job>>& active);
  // Readies the step's new sequences where the layers run (sessions on shards), before the
  // pass: a job that cannot start ends alone with its error, one without room yet leaves
  // this step (its chunk too) and tries again after the shard's Retry-After. False when no
  // chunk is left.
  bool admit(std::vector<std::shared_ptr<Job>>& all, std::vector<std::shared_ptr<Job>>& active, std::vector<SequenceChunk>& chunks);
  // No job could run: pause_ until the first one waiting for room tries again.
  void pause_until_room(std::span<const std::shared_ptr<Job>> all);
  // Puts the longest cached prefix of a new job's prompt in its cache, or the prefix another
  // running sequence holds. False: it waits, because one still prefilling will soon hold
  // more of its prompt than any has now (requests that arrive together prefill a shared
  // prefix once).
  bool start(Job& job, std::span<const std::shared_ptr<Job>> active);
  // An ended job's caches go at once (their memory; their sessions, where the layers run on
  // shards), not when the connection holding the Job lets it go: n > 1 choices of one
  // request end one by one, and a later one may be waiting for the room an earlier one holds.
  static void release(Job& job);
  // Drops the ended jobs, keeping what their caches hold in the prefix cache.
  void retire(std::vector<std::shared_ptr<Job>>& active);
  // The tokens whose keys and values a job's cache holds, from position 0.
  static std::span<const int> held(const Job& job);
  // Whether a job scores its prompt: every prefill row's logits, not only the last one's.
  static bool wants_prompt(const Job& job);
  // The token a row gives a job (−1: the job ended, its grammar stuck), and which of
  // `drafts` (the row's children in the job's tree) it keeps, or −1. Speculating jobs
  // choose from the sampler's distribution (unchanged row).
  int choose(Job& job, std::span<float> row, size_t ctx, std::span<const int> drafts, int& kept);
  // Hands `next` to the job, and ends it where the token ends it.
  void emit(Job& job, int next, size_t ctx);
  // Structured output: sets the logits of tokens the grammar does not allow next to −inf;
  // false when none is allowed (the automaton is stuck; the job is ended).
  bool constrain(Job& job, std::span<float> row, size_t ctx) const;

  Transformer& transformer_;
  const Options options_;
  mutable std::mutex mutex_;
  std::condition_variable work_;
  std::deque<std::shared_ptr<Job>> waiting_;
  size_t active_count_ = 0;
  size_t steps_ = 0;
  std::atomic<size_t> drafted_ = 0, accepted_ = 0;  // (the engine thread counts, stats() reads)
  std::atomic<size_t> kv_cache_bytes_ = 0;
  PrefixCache prefix_cache_;              // (the engine thread's)
  PrefixCache::Stats prefix_cache_stats_;  // its stats after the last step (under mutex_)
  bool stopping_ = false;
  // Set by a step in which no job could run because those left wait for room on the shards
  // (the engine thread's): the engine waits this long, or for a new request, before the next.
  std::chrono::milliseconds pause_{0};
  static constexpr std::chrono::milliseconds kMinRoomPause{20}, kMaxRoomPause{1000};
  std::thread engine_;
};

}  // namespace larql
