#include "cli/number_checks.h"
#include "cli/arithmetic_option.h"
#include "cli/command_model.h"
#include "cli/huge_pages_option.h"
#include "cli/run_command.h"
#include "cli/draft_option.h"
#include "infer/model_draft.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "cli/ffn_options.h"
#include "infer/generate.h"
#include "infer/prompt_cache_file.h"
#include "model/loader.h"
#include "net/remote_ffn.h"
#include "wire/wire_config.h"

namespace larql::cli {
namespace {

struct RunOptions {
  std::string model;
  std::optional<std::string> tokenizer;
  std::optional<std::string> prompt;
  std::vector<int> prompt_ids;
  size_t steps = 256;
  size_t ctx = 0;  // 0: the model's context
  float temperature = 0;
  float top_p = 1;
  uint64_t seed = 0;
  size_t threads = 0;
  bool ignore_eos = false;
  size_t prefill_chunk = kPrefillChunk;
  std::optional<std::string> draft;  // --draft
  DraftShape draft_shape;            // --draft-max, --draft-branches
  bool json = false;
  FfnOptions remote;
  std::optional<std::string> arithmetic;
  bool no_huge_pages = false;
  std::optional<std::string> prompt_cache;  // --prompt-cache FILE
};

int fail(const std::string& message) {
  std::cerr << "larql run: " << message << "\n";
  return 1;
}

int run(const RunOptions& o) {
  using Clock = std::chrono::steady_clock;
  const auto load_start = Clock::now();
  auto model = load_command_model("larql run", o.model, o.arithmetic);
  if (!model) return fail(model.error().message);
  const WeightsUsed used = o.remote.remote_layers ? WeightsUsed::head : o.remote.ffn ? WeightsUsed::all_but_ffn : WeightsUsed::all;
  if (auto placed = place_weights(*model, o.no_huge_pages, {used}); !placed)
    return fail(placed.error().message);
  auto tokenizer = load_tokenizer_for(*model, o.model, o.tokenizer);
  if (!tokenizer) return fail(tokenizer.error().message);
  const double load_seconds = std::chrono::duration<double>(Clock::now() - load_start).count();

  std::vector<int> prompt = o.prompt_ids;
  if (o.prompt) {
    if (!*tokenizer) return fail("--prompt needs a tokenizer (--tokenizer FILE); or pass --prompt-ids");
    prompt = (*tokenizer)->encode(*o.prompt);
  }
  for (int id : prompt)
    if (id < 0 || size_t(id) >= model->config.vocab)
      return fail("prompt id " + std::to_string(id) + " is outside the vocabulary (0.." +
                  std::to_string(model->config.vocab - 1) + ")");

  ThreadPool pool(o.threads ? o.threads : std::max(1u, std::thread::hardware_concurrency()));
  RemoteFfn* remote = nullptr;
  auto backend = make_ffn_backend(*model, pool, o.remote, "larql run", &remote);
  if (!backend) return fail(backend.error().message);
  std::unique_ptr<FfnBackend> ffn = std::move(*backend);
  Transformer transformer(*model, *ffn, pool);
  // --ctx caps prompt + generation (the KV cache grows with what is used, up to it).
  size_t steps = o.steps;
  if (o.ctx) {
    if (prompt.size() >= o.ctx)
      return fail("the prompt has " + std::to_string(prompt.size()) + " tokens; --ctx " + std::to_string(o.ctx) +
                  " leaves no room to generate");
    steps = std::min(steps, o.ctx - prompt.size());
  }
  // Whole layers on session shards: the sessions hold the prompt and what is generated
  // (a draft's rows past the last token too).
  std::unique_ptr<RemoteLayers> sessions;
  if (o.remote.remote_layers) {
    if (auto s = check_draft_for_sessions(o.remote, o.draft ? o.draft_shape.branches : 1); !s) return fail(s.error().message);
    const size_t positions = std::min(model->config.context, prompt.size() + steps + (o.draft ? o.draft_shape.max_draft : 0));
    auto connected = connect_remote_layers(*model, o.remote, positions, "larql run");
    if (!connected) return fail(connected.error().message);
    sessions = std::move(*connected);
    if (auto s = transformer.set_layer_ranges(sessions->ranges()); !s) return fail(s.error().message);
  }
  GenerateOptions options{steps, o.ignore_eos, {o.temperature, o.top_p, o.seed}};
  options.prefill_chunk = o.prefill_chunk;
  // A draft model runs here, its FFN too, whatever the target's --ffn.
  std::optional<Model> draft_model;
  std::unique_ptr<ModelDraft> draft;
  if (o.draft) {
    auto choice = parse_draft_option(*o.draft, o.draft_shape);
    if (!choice) return fail(choice.error().message);
    options.speculative = choice->options;
    if (choice->model) {
      auto loaded = load_command_model("larql run --draft", *choice->model, o.arithmetic);
      if (!loaded) return fail("--draft: " + loaded.error().message);
      draft_model = std::move(*loaded);
      auto created = ModelDraft::create(*draft_model, model->config, pool);
      if (!created) return fail(created.error().message);
      draft = std::move(*created);
      options.speculative->draft = [&draft](std::span<const int> context, size_t k) { return draft->propose(context, k); };
    }
  }

  // --prompt-cache: where the prompt starts as the file's tokens did, their keys and values
  // from it (at most the prompt's length − 1: the last row runs for its logits).
  if (o.prompt_cache) {
    if (o.remote.remote_layers)
      return fail("--prompt-cache keeps the prompt's keys and values here; with --remote-layers they live on the shards");
    if (std::filesystem::exists(*o.prompt_cache)) {
      auto loaded = load_prompt_cache(*o.prompt_cache, *model);
      if (!loaded) return fail(loaded.error().message);
      const size_t n = std::min(common_prefix(prompt, loaded->tokens), prompt.size() - 1);
      if (n > 0 && kv_serves_pass(kv_windows(model->config), loaded->cache, n)) {
        transformer.set_cache(copy_kv_prefix(model->config, loaded->cache, n));
        options.cached = n;
      }
    }
  }

  const Tokenizer* tok = tokenizer->get();
  std::optional<TextStream> stream;
  if (tok) stream.emplace(*tok, prompt.back());
  std::string text;
  bool first = true;
  auto emit = [&](const std::string& piece) {
    text += piece;
    if (!o.json) std::cout << piece << std::flush;
  };
  std::vector<Clock::time_point> arrivals;  // of each generated token, for the gaps between them
  auto on_token = [&](int token) {
    arrivals.push_back(Clock::now());
    emit(stream ? stream->push(token) : (first ? "" : " ") + std::to_string(token));
    first = false;
  };
  auto result = generate(transformer, prompt, options, on_token);
  if (!result) return fail(result.error().message);
  if (stream) emit(stream->finish());
  if (o.prompt_cache) {  // what the cache holds now: the prompt and what was generated, but the last token
    std::vector<int> held = prompt;
    if (!result->generated.empty()) held.insert(held.end(), result->generated.begin(), result->generated.end() - 1);
    if (auto s = save_prompt_cache(*o.prompt_cache, *model, held, transformer.cache()); !s) return fail(s.error().message);
  }
  if (!tok) text.clear();  // without a tokenizer the ids were printed, not text
  if (result->stop == StopReason::context)
    std::cerr << "larql run: stopped at the model's context length (" << model->config.context << " positions)\n";

  const double tps = result->decode_seconds > 0 && result->generated.size() > 1
                         ? double(result->generated.size() - 1) / result->decode_seconds
                         : 0.0;
  if (o.json) {
    nlohmann::json out{{"model", model->config.name},
                       {"prompt_ids", prompt},
                       {"generated_ids", result->generated},
                       {"text", text},
                       {"stop_reason", stop_reason_name(result->stop)},
                       {"tokens_per_second", tps},
                       {"prefill_tokens_per_second", result->prefill_seconds > 0 ? prompt.size() / result->prefill_seconds : 0.0},
                       {"load_seconds", load_seconds},
                       {"passes", result->passes},
                       {"threads", pool.size()}};
    if (o.prompt_cache) out["cached_tokens"] = options.cached;
    if (arrivals.size() > 1) {  // time between consecutive tokens: the tail a user feels
      std::vector<double> gaps;
      for (size_t i = 1; i < arrivals.size(); ++i)
        gaps.push_back(std::chrono::duration<double, std::milli>(arrivals[i] - arrivals[i - 1]).count());
      std::sort(gaps.begin(), gaps.end());
      auto at = [&](double q) { return gaps[std::min(gaps.size() - 1, size_t(q * double(gaps.size())))]; };
      out["token_ms"] = {{"p50", at(0.50)}, {"p99", at(0.99)}, {"max", gaps.back()}};
    }
    if (options.speculative) {
      out["drafted"] = result->drafted;
      out["accepted"] = result->accepted;
      out["tokens_per_pass"] = result->passes ? double(result->generated.size() - 1) / double(result->passes) : 0.0;
    }
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    out["max_rss_bytes"] = size_t(usage.ru_maxrss) * 1024;  // peak resident memory, Linux reports KiB
    out["kv_cache_bytes_per_position"] = model->config.kv_bytes_per_position();  // of the layers that own a cache
    out["kv_cache_bytes"] = transformer.cache().bytes();  // held at the end: sliding layers keep about their window
    out["wire"] = remote ? wire::describe(remote->request_encodings()) : std::string("local");
    if (sessions) {
      const RemoteLayersStats& st = sessions->stats();
      out["wire"] = o.remote.wire.value_or("f16");
      out["bytes_sent"] = st.bytes_sent;
      out["bytes_received"] = st.bytes_received;
      out["remote_ms"] = st.remote_ms;
      out["server_ms"] = st.server_ms;
      out["round_trips"] = st.round_trips;
      const size_t chunk = o.prefill_chunk ? o.prefill_chunk : prompt.size();
      const size_t passes = result->passes + (prompt.size() + chunk - 1) / chunk;  // the prompt's and the decode's
      out["round_trips_per_pass"] = double(st.round_trips) / double(passes);
      out["sessions_opened"] = st.sessions_opened;
      out["replays"] = st.replays;
      out["f32_fallbacks"] = st.f32_fallbacks;
    }
    if (remote) {
      const RemoteFfnStats& st = remote->stats();
      out["bytes_sent"] = st.bytes_sent;
      out["bytes_received"] = st.bytes_received;
      out["remote_ms"] = st.remote_ms;
      out["server_ms"] = st.server_ms;
      out["remote_calls"] = st.calls;
      out["f32_fallbacks"] = st.f32_fallbacks;
      out["backoffs"] = st.backoffs;
      out["hedges"] = st.hedges;
      out["hedge_wins"] = st.hedge_wins;
    }
    std::cout << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";  // text may end mid-character
  } else {
    std::cout << "\n";
  }
  return 0;
}

}  // namespace

void add_run_command(CLI::App& app) {
  auto o = std::make_shared<RunOptions>();
  CLI::App* cmd = app.add_subcommand("run", "Generate text from a model (FFN local, or remote with --ffn)");
  cmd->add_option("model", o->model, "llama2.c checkpoint (.bin)")->required();
  cmd->add_option("--tokenizer", o->tokenizer, "tokenizer file (llama2.c tokenizer.bin)");
  auto* prompt = cmd->add_option("--prompt", o->prompt, "prompt text, encoded with the tokenizer's rules");
  auto* ids = cmd->add_option("--prompt-ids", o->prompt_ids, "prompt token ids, used exactly as given")->delimiter(',');
  prompt->excludes(ids);
  cmd->add_option("--steps", o->steps, "maximum number of generated tokens")->capture_default_str();
  cmd->add_option("--ctx", o->ctx, "positions for prompt and generation together (default: the model's context)")
      ->check(positive());
  cmd->add_option("--temperature", o->temperature, "0 = greedy; above 0 samples")->check(non_negative());
  cmd->add_option("--top-p", o->top_p, "nucleus sampling mass (with --temperature)")->check(CLI::Range(0.0f, 1.0f));
  cmd->add_option("--seed", o->seed, "sampling seed");
  cmd->add_option("--threads", o->threads, "compute threads (default: all cores)");
  add_arithmetic_option(cmd, o->arithmetic);
  add_huge_pages_option(cmd, o->no_huge_pages);
  cmd->add_flag("--ignore-eos", o->ignore_eos, "do not stop at end tokens");
  cmd->add_option("--prefill-chunk", o->prefill_chunk,
                  "prompt positions per pass (the same logits; bounds a long prompt's buffers and the sliding layers' "
                  "caches); 0: the whole prompt in one pass")
      ->capture_default_str();
  cmd->add_option("--draft", o->draft,
                  "speculative decoding: lookup[:N] drafts the tokens that followed the longest earlier match "
                  "(up to N tokens, 3) of the text's tail, or a draft model's path (a small model with the target's "
                  "tokenizer, run here) proposes them; verified several per pass (one round trip per layer)");
  add_draft_shape_options(cmd, o->draft_shape);
  cmd->add_flag("--json", o->json, "print one JSON object instead of streaming text");
  cmd->add_option("--prompt-cache", o->prompt_cache,
                  "keep the prompt's keys and values in FILE: a later run whose prompt starts the same way continues from "
                  "them (refused, naming why, if FILE was written for another model, arithmetic or layout)");
  add_ffn_options(cmd, o->remote);
  cmd->callback([o, prompt, ids] {
    if (prompt->count() == 0 && ids->count() == 0) throw CLI::RequiredError("--prompt or --prompt-ids");
    if (int rc = run(*o); rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace larql::cli
