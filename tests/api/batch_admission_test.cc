// The engine admits new sequences where the layers run elsewhere before each step
// (BatchScheduler over LayerRangeBackend::admit). A sequence without room there yet waits
// for a later step while the running ones go on, then starts. One that cannot start ends
// alone with its error. Every answer equals a local engine's bit for bit, and no pass sees
// a sequence its range did not admit.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <set>

#include "api/batch_scheduler.h"
#include "infer/local_ffn.h"
#include "model/loader.h"
#include "model/synth.h"
#include "support/local_range.h"

namespace larql {
namespace {

namespace fs = std::filesystem;

constexpr int kFailing = 20, kWaiting = 30;  // the first prompt token of the sequences the range turns away

// Every layer, run locally; sequences are told apart by their prompt's first token. The
// one starting with kFailing cannot start; the one starting with kWaiting finds no room
// until `runner` (the first token of another sequence) has been in `passes_to_wait` passes
// since its first try.
class ScriptedRange : public test::LocalRange {
 public:
  ScriptedRange(const Model& model, ThreadPool& pool, int runner, size_t passes_to_wait)
      : LocalRange(model, pool, 0, model.config.layers - 1), runner_(runner), passes_to_wait_(passes_to_wait) {}

  void admit(std::span<const SequenceChunk> chunks, std::span<Admission> admissions) override {
    for (size_t c = 0; c < chunks.size(); ++c) {
      const SequenceChunk& ch = chunks[c];
      if (admissions[c].state != Admission::State::ready || admitted_.count(ch.cache)) continue;
      EXPECT_EQ(ch.pos, 0u);  // (no prefix cache: a new sequence starts at position 0)
      const int first = ch.tokens.front();
      if (first == kFailing) {
        admissions[c] = {Admission::State::failed, {}, Error{ErrorCode::shard_unavailable, "no shard takes the sequence"}};
        continue;
      }
      if (first == kWaiting) {
        ++tries;
        if (!runner_passes_at_first_try) runner_passes_at_first_try = runner_passes;
        if (runner_passes - *runner_passes_at_first_try < passes_to_wait_) {
          admissions[c] = {Admission::State::wait, std::chrono::milliseconds(0)};
          continue;
        }
        runner_passes_while_waiting = runner_passes - *runner_passes_at_first_try;
      }
      admitted_[ch.cache] = first;
    }
  }

  Status run(std::span<const SequenceChunk> chunks, std::vector<float>& x, bool logit_rows_only) override {
    for (const SequenceChunk& ch : chunks) {
      const auto it = admitted_.find(ch.cache);
      EXPECT_NE(it, admitted_.end()) << "a pass with a sequence the range did not admit";
      if (it != admitted_.end() && it->second == runner_) ++runner_passes;
    }
    return LocalRange::run(chunks, x, logit_rows_only);
  }

  size_t tries = 0, runner_passes = 0;
  std::optional<size_t> runner_passes_at_first_try;
  size_t runner_passes_while_waiting = 0;

 private:
  int runner_;
  size_t passes_to_wait_;
  std::map<const KvCache*, int> admitted_;
};

struct Answer {
  std::vector<int> tokens;
  std::vector<uint32_t> logprob_bits;
  Job::End end = Job::End::none;
  std::string error;
};

Answer collect(Job& job) {
  Answer a;
  for (size_t i = 0; i < 100000; ++i) {  // (bounded: every request here ends within seconds)
    auto e = job.next(std::chrono::milliseconds(100));
    if (!e) continue;
    if (e->logprobs) {
      uint32_t u;
      std::memcpy(&u, &e->logprobs->logprob, 4);
      a.logprob_bits.push_back(u);
    }
    if (e->token) a.tokens.push_back(*e->token);
    if (e->end != Job::End::none) {
      a.end = e->end;
      if (e->error) a.error = e->error->message;
      break;
    }
  }
  return a;
}

JobRequest request(int first, size_t max_tokens) {
  JobRequest r;
  r.prompt = {first, 7, 41, 99, 12, first + 1, 3, 150};
  r.max_tokens = max_tokens;
  r.top_logprobs = 2;
  return r;
}

TEST(BatchAdmission, ASequenceWaitingForRoomLetsTheOthersRunAndAFailedOneEndsAlone) {
  const fs::path dir = fs::temp_directory_path() / ("larql_batch_admission_" + std::to_string(::getpid()));
  const SynthSpec spec{.family = "llama", .hidden = 64, .layers = 3, .ffn = 128, .heads = 4, .kv_heads = 2, .head_dim = 16,
                       .vocab = 300, .context = 512, .dtype = DType::f32, .seed = 23};
  ASSERT_TRUE(write_synthetic_checkpoint(dir.string(), spec).ok());
  auto model = load_model(dir.string());
  fs::remove_all(dir);
  ASSERT_TRUE(model.ok()) << model.error().message;

  constexpr int kRunner = 10;
  constexpr size_t kPassesToWait = 5, kTokens = 20;
  ThreadPool pool(2);
  LocalFfn ffn(*model, pool);
  ScriptedRange range(*model, pool, kRunner, kPassesToWait);
  Transformer remote(*model, ffn, pool);
  ASSERT_TRUE(remote.set_layer_ranges({&range}).ok());
  std::vector<Answer> got;
  {
    BatchScheduler engine(remote, {.parallel = 4, .cache_bytes = 0});
    // Together, so that all three meet the range at the same first step.
    auto jobs = engine.submit_together({request(kRunner, kTokens), request(kFailing, kTokens), request(kWaiting, kTokens)});
    ASSERT_EQ(jobs.size(), 3u);
    for (auto& job : jobs) got.push_back(collect(*job));
  }

  // The local engine's answers.
  Transformer local(*model, ffn, pool);
  BatchScheduler plain(local, {.parallel = 4, .cache_bytes = 0});
  auto runner = plain.submit(request(kRunner, kTokens)), waiting = plain.submit(request(kWaiting, kTokens));
  const Answer runner_alone = collect(*runner), waiting_alone = collect(*waiting);

  EXPECT_EQ(got[0].end, Job::End::length) << got[0].error;
  EXPECT_EQ(got[0].tokens, runner_alone.tokens);
  EXPECT_EQ(got[0].logprob_bits, runner_alone.logprob_bits);
  EXPECT_EQ(got[0].tokens.size(), kTokens);

  EXPECT_EQ(got[1].end, Job::End::error);
  EXPECT_EQ(got[1].error, "no shard takes the sequence");
  EXPECT_TRUE(got[1].tokens.empty());

  EXPECT_EQ(got[2].end, Job::End::length) << got[2].error;
  EXPECT_EQ(got[2].tokens, waiting_alone.tokens);
  EXPECT_EQ(got[2].logprob_bits, waiting_alone.logprob_bits);
  // It waited, and the runner's passes went on meanwhile.
  EXPECT_GE(range.tries, 2u);
  EXPECT_GE(range.runner_passes_while_waiting, kPassesToWait);
}

}  // namespace
}  // namespace larql
