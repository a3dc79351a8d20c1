#include "api/batch_scheduler.h"

#include <algorithm>
#include <iostream>
#include <limits>

#include "kernels/attention.h"

namespace larql {

std::optional<Job::Event> Job::next(std::chrono::milliseconds wait) {
  std::unique_lock lock(mutex_);
  if (!ready_.wait_for(lock, wait, [&] { return !events_.empty(); })) return std::nullopt;
  Event e = std::move(events_.front());
  events_.pop_front();
  return e;
}

void Job::push(Event e) {
  e.at = std::chrono::steady_clock::now();
  std::lock_guard lock(mutex_);
  events_.push_back(std::move(e));
  ready_.notify_all();
}

BatchScheduler::BatchScheduler(Transformer& transformer, Options options)
    : transformer_(transformer),
      options_(options),
      prefix_cache_(transformer.config(), options.cache_bytes, options.fork_reach),
      engine_([this] { run(); }) {}

BatchScheduler::~BatchScheduler() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    work_.notify_all();
  }
  engine_.join();
}

std::shared_ptr<Job> BatchScheduler::make_job(JobRequest request) const {
  auto job = std::make_shared<Job>();
  job->request_ = std::move(request);
  job->arrived_ = std::chrono::steady_clock::now();
  job->sampler_.emplace(job->request_.sampler);
  job->sampler_->remember_prompt(job->request_.prompt);  // for a repetition penalty
  if (job->request_.grammar) job->matcher_.emplace(*job->request_.grammar);
  job->context_ = job->request_.prompt;
  if (options_.speculative && !job->matcher_) {
    job->draft_length_.emplace(*options_.speculative);
    if (options_.draft_model) {
      auto draft = ModelDraft::create(*options_.draft_model, transformer_.config(), *options_.draft_pool);
      if (draft) job->model_draft_ = std::move(*draft);  // (its vocabulary was checked at start-up)
    }
  }
  return job;
}

std::shared_ptr<Job> BatchScheduler::submit(JobRequest request) {
  auto jobs = submit_together({std::move(request)});
  return jobs.empty() ? nullptr : jobs.front();
}

std::vector<std::shared_ptr<Job>> BatchScheduler::submit_together(std::vector<JobRequest> requests) {
  std::vector<std::shared_ptr<Job>> jobs;
  for (JobRequest& r : requests) jobs.push_back(make_job(std::move(r)));
  std::lock_guard lock(mutex_);
  std::erase_if(waiting_, [](const auto& j) { return j->cancelled(); });  // a client that left frees its place at once
  if (active_count_ >= options_.parallel && waiting_.size() + jobs.size() > options_.max_waiting) return {};
  waiting_.insert(waiting_.end(), jobs.begin(), jobs.end());
  work_.notify_all();
  return jobs;
}

BatchScheduler::Stats BatchScheduler::stats() const {
  std::lock_guard lock(mutex_);
  // Cancelled waiters are not waiting any more, though the engine has not dropped them yet.
  const size_t waiting = size_t(std::count_if(waiting_.begin(), waiting_.end(), [](const auto& j) { return !j->cancelled(); }));
  return {waiting, active_count_, steps_, drafted_.load(), accepted_.load(), kv_cache_bytes_.load(), prefix_cache_stats_};
}

void BatchScheduler::run() {
  std::vector<std::shared_ptr<Job>> active;
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      // Drop waiters whose clients left, then admit in arrival order.
      std::erase_if(waiting_, [](const auto& j) { return j->cancelled(); });
      while (active.size() < options_.parallel && !waiting_.empty()) {
        active.push_back(std::move(waiting_.front()));
        waiting_.pop_front();
      }
      active_count_ = active.size();
      if (stopping_) break;
      if (active.empty()) {
        work_.wait_for(lock, std::chrono::milliseconds(100));  // woken by submit; bounded for stop
        continue;
      }
    }
    step(active);
    std::unique_lock lock(mutex_);
    ++steps_;
    // Every sequence waits for room on the shards: the next try after their Retry-After,
    // or sooner for a new request.
    if (pause_.count() > 0 && !stopping_) work_.wait_for(lock, pause_);
  }
  const Error shutting_down{ErrorCode::overloaded, "the server is shutting down; send the request elsewhere"};
  for (auto& job : active) job->push({std::nullopt, Job::End::error, shutting_down});
  std::lock_guard lock(mutex_);
  for (auto& job : waiting_) job->push({std::nullopt, Job::End::error, shutting_down});
}

bool BatchScheduler::wants_prompt(const Job& job) { return job.request_.prompt_logprobs && job.request_.top_logprobs; }

bool BatchScheduler::constrain(Job& job, std::span<float> row, size_t ctx) const {
  const JobRequest& r = job.request_;
  // Tokens that can still follow this one, each adding at least a byte to close the value.
  const size_t last = std::min(r.max_tokens, ctx - r.prompt.size());
  const size_t left = last > job.generated_ + 1 ? last - job.generated_ - 1 : 0;
  r.trie->allowed(*job.matcher_, left, job.allowed_);
  if (job.matcher_->accepting())  // a complete value that could still grow (a number): the end may come
    for (const auto* ends : {&transformer_.config().eos_ids, &r.stop_ids})
      for (int id : *ends)
        if (size_t(id) < job.allowed_.size()) job.allowed_[size_t(id)] = 1;
  bool any = false;
  for (size_t t = 0; t < row.size(); ++t) {
    if (t < job.allowed_.size() && job.allowed_[t]) any = true;
    else row[t] = -std::numeric_limits<float>::infinity();
  }
  return any;
}

int BatchScheduler::choose(Job& job, std::span<float> row, size_t ctx, std::span<const int> drafts, int& kept) {
  kept = -1;
  // Log-probabilities of the raw logits: kept before the sampler scales them in place.
  if (job.request_.top_logprobs) job.raw_.assign(row.begin(), row.end());
  if (job.matcher_ && !constrain(job, row, ctx)) {
    std::cerr << "larql api: structured output stopped: no token of the vocabulary can continue the JSON value "
                 "within the tokens left\n";
    job.push({std::nullopt, Job::End::eos});
    job.cancel();
    return -1;
  }
  if (!job.draft_length_) return job.sampler_->sample(row);
  // Speculating: the same distribution sample() draws from, a draft kept by the
  // speculative rule (greedy: kept when it is the argmax).
  job.sampler_->distribution(row, job.probs_);
  if (drafts.empty()) return job.sampler_->draw(job.probs_);
  const auto [token, which] = job.sampler_->verify(job.probs_, drafts);
  kept = which;
  return token;
}

void BatchScheduler::emit(Job& job, int next, size_t ctx) {
  const ModelConfig& c = transformer_.config();
  const auto& stops = job.request_.stop_ids;
  if (std::find(c.eos_ids.begin(), c.eos_ids.end(), next) != c.eos_ids.end() ||
      std::find(stops.begin(), stops.end(), next) != stops.end()) {
    job.push({std::nullopt, Job::End::eos});
    job.cancel();
    return;
  }
  ++job.generated_;
  job.last_token_ = next;
  job.context_.push_back(next);
  std::optional<TokenLogprobs> logprobs;  // (its filters as they were when `next` was drawn)
  if (job.request_.top_logprobs) logprobs = job.sampler_->logprobs(job.raw_, next, *job.request_.top_logprobs, job.allowed_);
  job.sampler_->remember(next);
  job.push({next, Job::End::none, std::nullopt, std::move(logprobs)});
  if (job.matcher_ && (!job.matcher_->feed(job.request_.trie->bytes(next)) || job.matcher_->closed())) {
    job.push({std::nullopt, Job::End::eos});  // the value is closed: nothing may follow it
    job.cancel();
    return;
  }
  // The token just chosen needs a position of its own to be fed at.
  if (job.generated_ >= job.request_.max_tokens || job.request_.prompt.size() + job.generated_ >= ctx) {
    job.push({std::nullopt, Job::End::length});
    job.cancel();
  }
}

std::span<const int> BatchScheduler::held(const Job& job) {
  const size_t prompt = job.request_.prompt.size();
  // Decoding, the last token chosen is not in yet (fed at the next step).
  const size_t n = job.prefilled_ < prompt ? job.prefilled_ : prompt + std::max<size_t>(job.generated_, 1) - 1;
  return {job.context_.data(), std::min(n, job.context_.size())};
}

bool BatchScheduler::start(Job& job, std::span<const std::shared_ptr<Job>> active) {
  const auto& prompt = job.request_.prompt;
  // A scored prompt runs from its first row; the last prompt row always runs, for its logits.
  if (!prefix_cache_.enabled() || wants_prompt(job) || prompt.size() < 2) return job.started_ = true;
  const size_t limit = prompt.size() - 1;
  std::vector<PrefixCache::Source> running;
  for (const auto& other : active)
    if (other.get() != &job && other->started_) running.push_back({held(*other), &other->cache_});
  const PrefixCache::Match match = prefix_cache_.find(prompt, limit, running);
  // Worth waiting for: a key block more than is held now.
  for (const auto& other : active)
    if (other.get() != &job && other->started_ && other->prefilled_ < other->request_.prompt.size()) {
      const size_t shared = std::min(common_prefix(other->request_.prompt, prompt), limit);
      if (shared >= match.positions + kKeyBlock && other->prefilled_ < shared) return false;
    }
  std::optional<KvCache> continued = match.positions ? transformer_.continue_from(*match.cache, match.positions) : std::nullopt;
  const size_t reused = continued ? match.positions : 0;  // (none: the shards could not continue it)
  if (continued) job.cache_ = std::move(*continued);
  job.prefilled_ = reused;
  job.cached_tokens_ = reused;
  prefix_cache_.count_lookup(reused);
  return job.started_ = true;
}

void BatchScheduler::retire(std::vector<std::shared_ptr<Job>>& active) {
  for (auto& job : active)
    if (job->cancelled()) {
      if (job->started_ && prefix_cache_.enabled()) {
        const std::span<const int> tokens = held(*job);
        prefix_cache_.keep({tokens.begin(), tokens.end()}, std::move(job->cache_));
      }
      release(*job);
    }
  std::erase_if(active, [](const auto& j) { return j->cancelled(); });
  std::lock_guard lock(mutex_);
  prefix_cache_stats_ = prefix_cache_.stats();
}

bool BatchScheduler::admit(std::vector<std::shared_ptr<Job>>& all, std::vector<std::shared_ptr<Job>>& active,
                           std::vector<SequenceChunk>& chunks) {
  const std::vector<Admission> admissions = transformer_.admit(chunks);
  const auto now = std::chrono::steady_clock::now();
  size_t kept = 0;
  for (size_t i = 0; i < active.size(); ++i) {
    const Admission& a = admissions[i];
    if (a.state == Admission::State::failed) {
      active[i]->push({std::nullopt, Job::End::error, a.error});
      release(*active[i]);  // (not kept: its sessions may be half open)
      std::erase(all, active[i]);
    } else if (a.state == Admission::State::wait) {
      active[i]->room_retry_at_ = now + std::clamp(a.retry_after, kMinRoomPause, kMaxRoomPause);
    } else {
      active[kept] = std::move(active[i]), chunks[kept] = chunks[i], ++kept;
    }
  }
  active.resize(kept), chunks.resize(kept);
  if (kept == 0) pause_until_room(all);
  return kept > 0;
}

void BatchScheduler::release(Job& job) {
  job.cache_ = KvCache{};
  job.model_draft_.reset();
}

void BatchScheduler::pause_until_room(std::span<const std::shared_ptr<Job>> all) {
  const auto now = std::chrono::steady_clock::now();
  for (const auto& job : all)
    if (job->room_retry_at_ > now) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(job->room_retry_at_ - now);
      pause_ = pause_.count() ? std::min(pause_, left) : left;
    }
}

void BatchScheduler::step(std::vector<std::shared_ptr<Job>>& all) {
  pause_ = {};
  retire(all);
  if (all.empty()) {
    kv_cache_bytes_ = 0;
    return;
  }
  // The jobs in this step: those whose prompt's cached prefix is in (the others wait for a
  // sequence still prefilling theirs), except those waiting for room on the shards.
  std::vector<std::shared_ptr<Job>> active;
  const auto now = std::chrono::steady_clock::now();
  for (auto& job : all)
    if ((job->started_ || start(*job, all)) && job->room_retry_at_ <= now) active.push_back(job);
  if (active.empty()) {  // (none waits for a job that is not running)
    pause_until_room(all);
    return;
  }
  const ModelConfig& c = transformer_.config();
  const size_t ctx = std::min(options_.ctx, c.context);
  // Each job's chunk: its next prompt piece, or its last token (and its drafts). A tree of
  // drafts (--draft-branches) is for a sequence alone in its step: beside others its extra
  // rows cost more than its fewer steps save (docs/benchmarks/history.md), so then a chain.
  std::vector<SequenceChunk> chunks;
  std::optional<SpeculativeOptions> spec = options_.speculative;
  if (spec && active.size() > 1) spec->branches = 1;
  const size_t prefilling = size_t(std::count_if(active.begin(), active.end(), [](const auto& job) {
    return job->prefilled_ < job->request_.prompt.size();
  }));
  const size_t piece = prefilling < active.size() ? options_.prefill_chunk
                                                  : std::max(options_.prefill_chunk, kPrefillRowsAlone / std::max<size_t>(prefilling, 1));
  for (auto& job : active) {
    const auto& prompt = job->request_.prompt;
    if (job->prefilled_ < prompt.size()) {
      // Scoring the prompt needs every position's logits (a row of the vocabulary each, so
      // pieces of prefill_chunk rows whatever runs beside it); generating, the last one's.
      const size_t n = std::min(wants_prompt(*job) ? options_.prefill_chunk : piece, prompt.size() - job->prefilled_);
      chunks.push_back({&job->cache_, {prompt.data() + job->prefilled_, n}, job->prefilled_, wants_prompt(*job) ? 0 : n - 1});
    } else {
      // The last token, and drafts under it where the sequence speculates (sweep_drafts).
      const size_t pos = prompt.size() + job->generated_ - 1;
      if (job->draft_length_) {
        DraftFunction propose;
        if (job->model_draft_) propose = [&job](std::span<const int> context, size_t k) { return job->model_draft_->propose(context, k); };
        job->fed_ = sweep_drafts(job->last_token_, job->context_, *job->draft_length_, *spec, propose, ctx - pos - 1,
                                 job->request_.max_tokens - job->generated_ - 1);
      } else {
        job->fed_ = DraftTree::build(job->last_token_, {}, 1);
      }
      chunks.push_back({&job->cache_, job->fed_.tokens, pos, 0, job->fed_.parents});
    }
  }
  if (!admit(all, active, chunks)) return;
  std::vector<float> logits;
  if (auto s = transformer_.forward_batch(chunks, logits); !s) {
    for (auto& job : all) job->push({std::nullopt, Job::End::error, s.error()});
    all.clear();  // (their caches are not kept: the failed pass may have left some half written)
    return;
  }
  // Sample where a sequence's prompt is all in (its logits are those of its last position).
  const size_t V = c.vocab;
  size_t first_row = 0;  // each chunk's logits follow the previous chunk's
  for (size_t i = 0; i < active.size(); ++i) {
    Job& job = *active[i];
    const auto& prompt = job.request_.prompt;
    const SequenceChunk& chunk = chunks[i];
    const size_t rows = chunk.tokens.size() - chunk.first_logit;
    const size_t last_row = first_row + rows - 1;
    first_row += rows;
    if (job.prefilled_ < prompt.size()) {
      if (wants_prompt(job))  // row t scores the prompt's token after it
        for (size_t t = 0; t < rows && chunk.pos + t + 1 < prompt.size(); ++t)
          job.prompt_logprobs_.push_back(job.sampler_->logprobs({logits.data() + (last_row + 1 - rows + t) * V, V},
                                                                prompt[chunk.pos + t + 1], *job.request_.top_logprobs));
      job.prefilled_ += chunk.tokens.size();
      if (job.prefilled_ < prompt.size()) continue;
      if (wants_prompt(job)) {
        // (The last position's row scores no prompt token: it is the first generated one's.)
        job.push({std::nullopt, Job::End::none, std::nullopt, std::nullopt, std::move(job.prompt_logprobs_)});
        job.prompt_logprobs_.clear();
      }
      if (job.request_.max_tokens == 0) {
        job.push({std::nullopt, Job::End::length});
        job.cancel();
        continue;
      }
    }
    // Decoding, row r follows the path to fed token r: its choice is the next token, and the
    // walk goes on down the tree while that is one of the row's children (a finished
    // prefill has one row and no drafts). The kept path's cache entries move to their
    // positions.
    if (job.cancelled()) continue;
    const bool decoding = chunk.tokens.data() == job.fed_.tokens.data();
    const DraftTree one_row{{job.last_token_}, {-1}};
    const size_t row0 = decoding ? last_row + 1 - rows : last_row;
    const std::vector<size_t> path = walk_draft_tree(
        decoding ? job.fed_ : one_row,
        [&](size_t row, std::span<const int> candidates, int& kept) {
          return choose(job, {logits.data() + (row0 + row) * V, V}, ctx, candidates, kept);
        },
        [&](int next) {
          if (next >= 0) emit(job, next, ctx);
          return !job.cancelled();
        });
    if (job.draft_length_ && decoding) {
      keep_path(c, job.cache_, path, chunk.pos);
      job.draft_length_->after(job.fed_.drafted(), path.size() - 1);
      drafted_ += job.fed_.drafted();
      accepted_ += path.size() - 1;
    }
  }
  retire(all);
  size_t kv_bytes = 0;
  for (const auto& job : all) kv_bytes += job->cache_.bytes();
  kv_cache_bytes_ = kv_bytes;
}

}  // namespace larql
