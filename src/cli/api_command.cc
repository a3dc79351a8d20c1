#include "cli/number_checks.h"
#include "cli/api_command.h"
#include "cli/arithmetic_option.h"
#include "cli/draft_option.h"
#include "cli/command_model.h"
#include "cli/huge_pages_option.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>

#include "api/api_server.h"
#include "base/memory_size.h"
#include "cli/ffn_options.h"
#include "cli/http_options.h"
#include "model/gguf.h"
#include "model/loader.h"
#include "wire/wire_config.h"

namespace larql::cli {
namespace {

struct ApiCommandOptions {
  std::string model;
  std::optional<std::string> tokenizer;
  FfnOptions remote;
  std::optional<std::string> chat_template;
  std::optional<size_t> ctx;          // default: the model's (over session shards, 2048)
  std::optional<size_t> cache_bytes;  // default: parallel × ctx positions' KV, at most a quarter of memory
  size_t threads = 0;
  size_t max_queue = 64;
  size_t parallel = 8;
  size_t prefill_chunk = ApiOptions{}.prefill_chunk;
  // A request is text or token ids for one context: 8 MiB is far more than any context
  // holds, and bounds the JSON parsing and tokenizing a body can ask for.
  size_t max_body_mb = 8;
  HttpServerOptions http;
  std::optional<std::string> arithmetic;
  bool no_huge_pages = false;
  std::optional<std::string> draft;  // --draft
  DraftShape draft_shape;            // --draft-max, --draft-branches
};

// The model's own chat template text: tokenizer_config.json's chat_template (a string, or
// a list of named templates: "default"), or GGUF's tokenizer.chat_template.
std::optional<std::string> model_chat_template(const std::string& path) {
  namespace fs = std::filesystem;
  if (fs::is_directory(path)) {
    std::ifstream in(fs::path(path) / "tokenizer_config.json");
    if (!in) return std::nullopt;
    const auto j = nlohmann::json::parse(in, nullptr, false);
    if (!j.is_object() || !j.contains("chat_template")) return std::nullopt;
    const auto& t = j["chat_template"];
    if (t.is_string()) return t.get<std::string>();
    if (t.is_array())
      for (const auto& named : t)
        if (named.is_object() && named.value("name", std::string()) == "default" && named.contains("template") &&
            named["template"].is_string())
          return named["template"].get<std::string>();
    return std::nullopt;
  }
  if (!is_gguf_file(path)) return std::nullopt;
  auto file = read_gguf(path);
  if (!file) return std::nullopt;
  const GgufValue* t = file->find("tokenizer.chat_template");
  return t && t->type == GgufValueType::string ? std::optional(t->text) : std::nullopt;
}

int api(ApiCommandOptions o) {
  block_termination_signals();  // before any thread starts: the server's signal thread takes them
  auto fail = [](const std::string& m) {
    std::cerr << "larql api: " << m << "\n";
    return 2;
  };
  if (!o.http.api_key)
    if (const char* key = std::getenv("LARQL_API_KEY"); key && *key) o.http.api_key = key;
  auto model = load_command_model("larql api", o.model, o.arithmetic);
  if (!model) return fail(model.error().message);
  const WeightsUsed used = o.remote.remote_layers ? WeightsUsed::head : o.remote.ffn ? WeightsUsed::all_but_ffn : WeightsUsed::all;
  if (auto placed = place_weights(*model, o.no_huge_pages, {used}); !placed)
    return fail(placed.error().message);
  auto tokenizer = load_tokenizer_for(*model, o.model, o.tokenizer);
  if (!tokenizer) return fail(tokenizer.error().message);
  if (!*tokenizer) return fail("the model has no tokenizer; pass --tokenizer FILE (the API speaks text)");

  // Locally the KV cache grows with the positions used, so the model's whole context costs
  // nothing up front; a session shard reserves a sequence's at open.
  const size_t ctx = std::min(o.ctx.value_or(o.remote.remote_layers ? 2048 : model->config.context), model->config.context);
  const size_t kv_per_sequence = ctx * model->config.kv_bytes_per_position();  // (KV-shared layers hold none)
  // (With --remote-layers the kept sequences are sessions on the shards, their bytes there.)
  const size_t cache_bytes = o.cache_bytes.value_or(std::min(o.parallel * kv_per_sequence, quarter_of_memory()));
  ApiOptions options{std::filesystem::path(o.model).filename().string(), ctx, o.max_queue, o.parallel, std::nullopt};
  options.cache_bytes = cache_bytes;
  options.key_required = o.http.api_key.has_value();
  options.prefill_chunk = o.prefill_chunk;
  // A draft model runs here (its FFN too), one KV cache per sequence.
  std::optional<Model> draft_model;
  if (o.draft) {
    auto choice = parse_draft_option(*o.draft, o.draft_shape);
    if (!choice) return fail(choice.error().message);
    options.speculative = choice->options;
    if (choice->model) {
      auto loaded = load_command_model("larql api --draft", *choice->model, o.arithmetic);
      if (!loaded) return fail("--draft: " + loaded.error().message);
      draft_model = std::move(*loaded);
      ThreadPool check_pool(1);
      if (auto checked = ModelDraft::create(*draft_model, model->config, check_pool); !checked) return fail(checked.error().message);
      options.draft_model = &*draft_model;
    }
  }
  if (options.model_id.empty()) options.model_id = model->config.name;
  if (o.chat_template) {
    options.chat_format = find_chat_format(*o.chat_template);
    if (!options.chat_format) return fail("--chat-template '" + *o.chat_template + "' is not one of llama3, llama2, chatml, gemma, gemma4, harmony");
  } else if (auto text = model_chat_template(o.model)) {
    options.chat_format = detect_chat_format(*text);
    if (!options.chat_format)
      std::cerr << "larql api: the model's chat template is not one larql recognises; chat requests will get a 400 "
                   "(name one with --chat-template)\n";
  }

  const size_t threads = o.threads ? o.threads : std::max(1u, std::thread::hardware_concurrency());
  ThreadPool pool(threads);
  RemoteFfn* remote = nullptr;
  auto backend = make_ffn_backend(*model, pool, o.remote, "larql api", &remote);
  if (!backend) return fail(backend.error().message);
  // Whole layers on session shards: a session per sequence, sized to --ctx.
  std::unique_ptr<RemoteLayers> sessions;
  if (o.remote.remote_layers) {
    if (auto s = check_draft_for_sessions(o.remote, o.draft ? o.draft_shape.branches : 1); !s) return fail(s.error().message);
    auto connected = connect_remote_layers(*model, o.remote, ctx, "larql api");
    if (!connected) return fail(connected.error().message);
    sessions = std::move(*connected);
    options.layer_ranges = sessions->ranges();
    options.fork_reach = sessions->rewind_positions();
    options.session_replays = [s = sessions.get()] { return s->replays(); };
  }
  ApiServer server(*model, tokenizer->get(), **backend, pool, options);
  // A shard with no room for a new session: kept prefixes' sessions go first.
  if (sessions) sessions->set_overload_relief([&server] { return server.drop_cached_prefix(); });
  o.http.render_error = openai_error_for;
  o.http.max_body_bytes = o.max_body_mb << 20;
  auto mib = [](size_t bytes) { return std::to_string((bytes + (1 << 20) - 1) >> 20) + " MiB"; };
  const std::string describe =
      "larql api: model " + options.model_id + ", ctx " + std::to_string(ctx) + " (KV cache up to " + mib(kv_per_sequence) +
      " a sequence), prefix cache " + (cache_bytes ? mib(cache_bytes) : std::string("off")) + ", chat " +
      (options.chat_format ? std::string(chat_format_info(*options.chat_format).name) : std::string("none")) + ", " +
      (remote     ? "FFN remote (" + wire::describe(remote->request_encodings()) + ")"
       : sessions ? "layers on session shards (" + o.remote.wire.value_or("f16") + ")"
                  : std::string("FFN local")) +
      ", " +
      std::to_string(o.parallel) + " sequences at a time, " + std::to_string(threads) + " threads" +
      (o.draft ? ", drafts by " + *o.draft : std::string()) +
      (o.http.api_key ? ", key required" : "");
  return serve_http(server.routes(), o.http, describe);
}

}  // namespace

void add_api_command(CLI::App& app) {
  auto o = std::make_shared<ApiCommandOptions>();
  o->http.port = 8000;
  CLI::App* cmd = app.add_subcommand("api", "Serve the OpenAI-compatible HTTP API (completions, chat, streaming)");
  cmd->add_option("model", o->model, "llama2.c checkpoint, Hugging Face directory or GGUF file")->required();
  cmd->add_option("--tokenizer", o->tokenizer, "tokenizer file (default: the model's own)");
  cmd->add_option("--ffn", o->remote.ffn, "remote FFN: a URL (router or all-layer shard) or \"0-1=URL,2-3=URL\"");
  cmd->add_option("--wire", o->remote.wire, "wire format with --ffn: f32, f16 (default), q8 or i8");
  cmd->add_option("--ffn-api-key", o->remote.api_key, "bearer key for the shards (default: LARQL_API_KEY)");
  cmd->add_option("--ca-cert", o->remote.ca_cert, "CA certificate (PEM) for https:// shards with a private CA");
  cmd->add_option("--timeout-ms", o->remote.timeout_ms, "per-call timeout with --ffn")->capture_default_str()->check(positive());
  add_hedge_option(cmd, o->remote);
  add_expert_rows_option(cmd, o->remote);
  add_remote_layers_option(cmd, o->remote);
  cmd->add_option("--host", o->http.host, "address to listen on")->capture_default_str();
  cmd->add_option("--port", o->http.port, "port (0: any free port, printed at start-up)")->capture_default_str()->check(CLI::Range(0, 65535));
  cmd->add_option("--ctx", o->ctx,
                  "positions per sequence, prompt and completion (default: the model's context, allocated as used; "
                  "with --remote-layers 2048, reserved on the shards)")
      ->check(CLI::Range(size_t{2}, size_t{1} << 24));
  cmd->add_option("--cache-bytes", o->cache_bytes,
                  "prompt prefix cache: keys and values of finished sequences kept for prompts that start the same way "
                  "(default: --parallel x --ctx positions' worth, at most a quarter of memory; 0: off; with "
                  "--remote-layers the kept sequences are sessions on the shards)")
      ->check(CLI::Range(size_t{0}, size_t{1} << 50));
  cmd->add_option("--api-key", o->http.api_key, "require Authorization: Bearer KEY everywhere but /health (also LARQL_API_KEY)");
  cmd->add_option("--chat-template", o->chat_template, "llama3, llama2, chatml, gemma, gemma4 or harmony (default: recognised from the model)");
  cmd->add_option("--threads", o->threads, "compute threads (default: all cores)");
  add_arithmetic_option(cmd, o->arithmetic);
  add_huge_pages_option(cmd, o->no_huge_pages);
  cmd->add_option("--draft", o->draft,
                  "speculative decoding for every request: lookup[:N] drafts what followed the longest earlier match (up to N "
                  "tokens, 3) of each sequence's tail, or a draft model's path (the target's tokenizer; run here, a KV cache "
                  "per sequence) proposes them; verified several per step (one FFN call per layer for all)");
  add_draft_shape_options(cmd, o->draft_shape);
  cmd->add_option("--parallel", o->parallel, "sequences decoding together (one FFN call per layer per step for all)")
      ->capture_default_str()
      ->check(CLI::Range(size_t{1}, size_t{256}));
  cmd->add_option("--prefill-chunk", o->prefill_chunk,
                  "a sequence's prompt tokens per step beside sequences that decode (with none decoding, prompts share "
                  "2048 rows a step): larger gives a long prompt fewer steps (round trips through remote shards), smaller "
                  "keeps the other sequences' tokens coming meanwhile")
      ->capture_default_str()
      ->check(CLI::Range(size_t{1}, size_t{8192}));
  cmd->add_option("--max-queue", o->max_queue, "requests that may wait beyond the running ones before 429")->capture_default_str();
  cmd->add_option("--max-body-mb", o->max_body_mb, "largest request body in MiB (else 413)")
      ->capture_default_str()
      ->check(CLI::Range(size_t{1}, size_t{1} << 20));
  cmd->add_option("--tls-cert", o->http.tls_cert, "serve HTTPS with this certificate (PEM)");
  cmd->add_option("--tls-key", o->http.tls_key, "private key of --tls-cert (PEM)");
  add_connection_limit_options(*cmd, o->http);
  cmd->callback([o] {
    if (int rc = api(*o); rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace larql::cli
