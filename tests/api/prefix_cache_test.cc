// The prompt prefix cache (api/prefix_cache.h) in the engine: every answer with it equals
// the answer without it, bit for bit in the log-probabilities, for chat turns that resend
// their history, requests that share a prefix at once, sampling, drafts, a cache evicting
// as it goes, one too small for any prompt and sliding-window layers; the prefix is reused
// (cached_tokens) and, for requests that arrive together, prefilled once.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <ostream>
#include <random>

#include "api/batch_scheduler.h"
#include "infer/local_ffn.h"
#include "model/loader.h"
#include "model/synth.h"

namespace larql {
namespace {

namespace fs = std::filesystem;

// What a request got: its tokens with their log-probabilities' bits, how it ended, and how
// many prompt tokens came from the cache.
struct Answer {
  std::vector<int> tokens;
  std::vector<uint32_t> logprob_bits;  // each token's, then its alternatives', in order
  Job::End end = Job::End::none;
  size_t cached = 0;
  bool operator==(const Answer& o) const { return tokens == o.tokens && logprob_bits == o.logprob_bits && end == o.end; }
};

std::ostream& operator<<(std::ostream& o, const Answer& a) {
  o << "tokens";
  for (int t : a.tokens) o << ' ' << t;
  return o << " (" << a.logprob_bits.size() << " logprob words, end " << int(a.end) << ", " << a.cached << " cached)";
}

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

Answer collect(Job& job) {
  Answer a;
  for (size_t i = 0; i < 100000; ++i) {  // (bounded: every request here ends within seconds)
    auto e = job.next(std::chrono::milliseconds(100));
    if (!e) continue;
    if (e->prompt_logprobs)
      for (const TokenLogprobs& t : *e->prompt_logprobs) a.logprob_bits.push_back(bits(t.logprob));
    if (e->logprobs) {
      a.logprob_bits.push_back(bits(e->logprobs->logprob));
      for (const auto& [id, lp] : e->logprobs->top) a.logprob_bits.push_back(uint32_t(id)), a.logprob_bits.push_back(bits(lp));
    }
    if (e->token) a.tokens.push_back(*e->token);
    if (e->end != Job::End::none) {
      a.end = e->end;
      EXPECT_NE(e->end, Job::End::error) << (e->error ? e->error->message : "");
      break;
    }
  }
  a.cached = job.cached_tokens();
  return a;
}

class PrefixCacheTest : public ::testing::Test {
 public:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("larql_prefix_cache_" + std::to_string(::getpid()));
    // A llama model, and a Gemma 4 E one whose sliding layers keep a window of 16 positions.
    const SynthSpec llama{.family = "llama", .hidden = 64, .layers = 3, .ffn = 128, .heads = 4, .kv_heads = 2, .head_dim = 16,
                          .vocab = 300, .context = 2048, .dtype = DType::f32, .seed = 11};
    const SynthSpec gemma{.family = "gemma4", .hidden = 64, .layers = 6, .ffn = 128, .heads = 2, .kv_heads = 1, .head_dim = 16,
                          .sliding_window = 16, .vocab = 300, .context = 2048, .dtype = DType::f32, .seed = 5,
                          .ple_dim = 8, .kv_shared = 2, .sliding_period = 3};
    for (const auto& [name, spec] : {std::pair{"llama", llama}, std::pair{"gemma", gemma}}) {
      ASSERT_TRUE(write_synthetic_checkpoint((dir_ / name).string(), spec).ok());
      auto model = load_model((dir_ / name).string());
      ASSERT_TRUE(model.ok()) << model.error().message;
      (std::string(name) == "llama" ? llama_ : gemma_) = new Model(std::move(*model));
    }
  }
  static void TearDownTestSuite() {
    delete llama_;
    delete gemma_;
    fs::remove_all(dir_);
  }
  void SetUp() override { ASSERT_TRUE(llama_ && gemma_) << "the suite's models were not written"; }

  // An engine over `model`, its prefix cache bounded by `cache_bytes` (0: none).
  struct Engine {
    Engine(const Model& model, size_t cache_bytes, size_t parallel = 4, std::optional<SpeculativeOptions> spec = {})
        : pool(2), ffn(model, pool), transformer(model, ffn, pool),
          scheduler(transformer, {.parallel = parallel, .prefill_chunk = 16, .speculative = spec, .cache_bytes = cache_bytes}) {}
    ThreadPool pool;
    LocalFfn ffn;
    Transformer transformer;
    BatchScheduler scheduler;
    // The requests sent together, and what each got.
    std::vector<Answer> run(const std::vector<JobRequest>& requests) {
      std::vector<std::shared_ptr<Job>> jobs;
      for (const JobRequest& r : requests) {
        jobs.push_back(scheduler.submit(r));
        EXPECT_NE(jobs.back(), nullptr);
      }
      std::vector<Answer> out;
      for (auto& job : jobs) out.push_back(job ? collect(*job) : Answer{});
      return out;
    }
    Answer run(const JobRequest& request) { return run(std::vector{request}).front(); }
  };

  static std::vector<int> random_tokens(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<int> out(n);
    for (int& t : out) t = int(rng() % 290) + 5;  // (clear of the synthetic vocabulary's special ids)
    return out;
  }
  static JobRequest request(std::vector<int> prompt, size_t max_tokens = 12) {
    JobRequest r;
    r.prompt = std::move(prompt);
    r.max_tokens = max_tokens;
    r.top_logprobs = 3;
    return r;
  }
  static size_t kv_bytes_per_position(const Model& m) { return m.config.kv_bytes_per_position(); }

  static inline fs::path dir_;
  static inline Model* llama_ = nullptr;
  static inline Model* gemma_ = nullptr;
};

// Chat: each turn's prompt is the last one, its answer and new text.
void expect_chat_turns_equal(const Model& model, size_t turns, size_t new_tokens) {
  PrefixCacheTest::Engine cached(model, size_t(1) << 30), plain(model, 0);
  std::vector<int> prompt;
  for (size_t turn = 0; turn < turns; ++turn) {
    const std::vector<int> more = [&] {
      std::mt19937 rng(uint32_t(100 + turn));
      std::vector<int> t(new_tokens);
      for (int& id : t) id = int(rng() % 290) + 5;
      return t;
    }();
    prompt.insert(prompt.end(), more.begin(), more.end());
    JobRequest r;
    r.prompt = prompt;
    r.max_tokens = 10;
    r.top_logprobs = 3;
    const Answer with = cached.run(r), without = plain.run(r);
    EXPECT_EQ(with, without) << "turn " << turn;
    EXPECT_EQ(without.cached, 0u);
    if (turn > 0) {
      EXPECT_GE(with.cached, prompt.size() - new_tokens - 1) << "turn " << turn;
    }
    prompt.insert(prompt.end(), with.tokens.begin(), with.tokens.end());
  }
  EXPECT_GT(cached.scheduler.stats().prefix_cache.hits, 0u);
  EXPECT_EQ(plain.scheduler.stats().prefix_cache.lookups, 0u);
}

TEST_F(PrefixCacheTest, ChatTurnsGiveTheAnswersOfAnUncachedEngineBitForBit) { expect_chat_turns_equal(*llama_, 5, 40); }

TEST_F(PrefixCacheTest, SlidingWindowLayersReuseWhatTheyStillHold) {
  // Turns of 40 new tokens over a window of 16: the kept sequence serves its own end.
  expect_chat_turns_equal(*gemma_, 4, 40);
  // A prompt that leaves a long kept one far before its end needs positions its sliding
  // layers dropped: not served from it, and still the same answer.
  Engine cached(*gemma_, size_t(1) << 30), plain(*gemma_, 0);
  const std::vector<int> long_prompt = random_tokens(400, 1);
  EXPECT_EQ(cached.run(request(long_prompt)), plain.run(request(long_prompt)));
  std::vector<int> early(long_prompt.begin(), long_prompt.begin() + 100);
  const std::vector<int> tail = random_tokens(20, 2);
  early.insert(early.end(), tail.begin(), tail.end());
  const Answer with = cached.run(request(early)), without = plain.run(request(early));
  EXPECT_EQ(with, without);
  EXPECT_EQ(with.cached, 0u) << "positions 0..99 of the long sequence's sliding layers are gone";
}

TEST_F(PrefixCacheTest, RequestsSentTogetherPrefillTheirSharedPrefixOnce) {
  // Agents: one long system prompt, different user messages, more requests than run at once.
  const std::vector<int> system = random_tokens(300, 3);
  std::vector<JobRequest> requests;
  for (uint32_t i = 0; i < 8; ++i) {
    std::vector<int> prompt = system;
    const std::vector<int> user = random_tokens(10, 50 + i);
    prompt.insert(prompt.end(), user.begin(), user.end());
    requests.push_back(request(prompt, 6));
  }
  Engine cached(*llama_, size_t(1) << 30, 4), plain(*llama_, 0, 4);
  const std::vector<Answer> with = cached.run(requests), without = plain.run(requests);
  ASSERT_EQ(with.size(), without.size());
  size_t reused = 0;
  for (size_t i = 0; i < with.size(); ++i) {
    EXPECT_EQ(with[i], without[i]) << "request " << i;
    reused += with[i].cached;
  }
  EXPECT_EQ(reused, 7 * system.size()) << "all but the first continue from the system prompt";
}

TEST_F(PrefixCacheTest, SampledAndDraftedAnswersAreTheUncachedOnes) {
  const std::vector<int> first = random_tokens(90, 4);
  std::vector<int> second = first;
  const std::vector<int> more = random_tokens(30, 5);
  second.insert(second.end(), more.begin(), more.end());
  SpeculativeOptions spec;
  spec.max_draft = 4;
  for (const bool drafts : {false, true}) {
    Engine cached(*llama_, size_t(1) << 30, 4, drafts ? std::optional(spec) : std::nullopt);
    Engine plain(*llama_, 0, 4, drafts ? std::optional(spec) : std::nullopt);
    for (const auto& prompt : {first, second, first}) {
      JobRequest r = request(prompt, 24);
      r.sampler = {.temperature = 0.9f, .top_p = 0.95f, .seed = 17, .repetition_penalty = 1.1f};
      const Answer with = cached.run(r), without = plain.run(r);
      EXPECT_EQ(with, without) << (drafts ? "drafts" : "no drafts");
    }
    EXPECT_GE(cached.scheduler.stats().prefix_cache.hits, 2u);
  }
}

TEST_F(PrefixCacheTest, AScoredPromptRunsUncachedFromItsFirstRow) {
  const std::vector<int> prompt = random_tokens(60, 6);
  Engine cached(*llama_, size_t(1) << 30), plain(*llama_, 0);
  cached.run(request(prompt));  // now kept
  JobRequest r = request(prompt, 4);
  r.prompt_logprobs = true;
  const Answer with = cached.run(r), without = plain.run(r);
  EXPECT_EQ(with, without);
  EXPECT_EQ(with.cached, 0u);
  EXPECT_EQ(with.logprob_bits.size(), without.logprob_bits.size());
}

TEST_F(PrefixCacheTest, EvictsTheLeastRecentlyUsedAndStaysWithinItsBound) {
  // Room for about two sequences of 100 positions: three prompts taking turns evict each other.
  const size_t bound = 2 * 128 * kv_bytes_per_position(*llama_) + 4096;
  Engine cached(*llama_, bound), plain(*llama_, 0);
  const std::vector<std::vector<int>> prompts = {random_tokens(90, 7), random_tokens(90, 8), random_tokens(90, 9)};
  for (size_t round = 0; round < 9; ++round) {
    std::vector<int> prompt = prompts[round % 3];
    prompt.push_back(int(round) + 5);
    EXPECT_EQ(cached.run(request(prompt)), plain.run(request(prompt))) << "round " << round;
    const PrefixCache::Stats st = cached.scheduler.stats().prefix_cache;
    EXPECT_LE(st.bytes, bound) << "round " << round;
  }
  const PrefixCache::Stats st = cached.scheduler.stats().prefix_cache;
  EXPECT_GT(st.evicted, 0u);
  EXPECT_EQ(st.hits, 0u) << "each prompt's sequence was evicted before it came back";
}

TEST_F(PrefixCacheTest, ACacheTooSmallForOnePromptStillAnswersAndKeepsNothing) {
  Engine tiny(*llama_, 1000), plain(*llama_, 0);
  const std::vector<int> prompt = random_tokens(50, 10);
  for (int i = 0; i < 2; ++i) EXPECT_EQ(tiny.run(request(prompt)), plain.run(request(prompt)));
  const PrefixCache::Stats st = tiny.scheduler.stats().prefix_cache;
  EXPECT_EQ(st.sequences, 0u);
  EXPECT_EQ(st.bytes, 0u);
  EXPECT_EQ(st.hits, 0u);
}

TEST_F(PrefixCacheTest, RequestsDivergingAtEveryKeyBlockShareWhatTheyShare) {
  // Each prompt keeps the previous one's first 16·k tokens, then goes its own way.
  Engine cached(*llama_, size_t(1) << 30), plain(*llama_, 0);
  std::vector<int> previous = random_tokens(160, 20);
  EXPECT_EQ(cached.run(request(previous, 3)), plain.run(request(previous, 3)));
  for (uint32_t k = 1; k < 9; ++k) {
    std::vector<int> prompt(previous.begin(), previous.begin() + 16 * k);
    const std::vector<int> rest = random_tokens(160 - 16 * k, 30 + k);
    prompt.insert(prompt.end(), rest.begin(), rest.end());
    const Answer with = cached.run(request(prompt, 3)), without = plain.run(request(prompt, 3));
    EXPECT_EQ(with, without) << k;
    EXPECT_GE(with.cached, 16 * k) << k;
    previous = prompt;
  }
}

}  // namespace
}  // namespace larql
