#include "api/api_server.h"

#include <chrono>
#include <ctime>
#include <limits>
#include <random>
#include <sstream>

#include "api/harmony.h"
#include "net/web_pages.h"
#include "api/logprobs_json.h"
#include "api/stop_strings.h"
#include "api/tool_calls.h"

namespace larql {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

std::string sse(const json& event) { return "data: " + json_text(event) + "\n\n"; }

// Latency histograms' bounds, seconds: a first token waits for the queue and a prefill,
// later ones for a decode step.
constexpr double kFirstTokenBuckets[] = {0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
constexpr double kTokenGapBuckets[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5};

json error_json(const OpenAiError& e) {
  return {{"error",
           {{"message", e.message},
            {"type", e.type},
            {"param", e.param.empty() ? json() : json(e.param)},
            {"code", e.code.empty() ? json() : json(e.code)}}}};
}

}  // namespace

HttpReply openai_error_reply(const OpenAiError& e) {
  HttpReply reply{e.status, "application/json", json_text(error_json(e))};
  if (e.status == 429 || e.status == 503) reply.retry_after_s = 1;
  return reply;
}

HttpReply openai_error_for(const Error& e) {
  const int status = http_status(e.code);
  const std::string type = status == 401 ? "authentication_error" : status >= 500 ? "server_error" : "invalid_request_error";
  return openai_error_reply({status, e.message, type, "", std::string(error_code_name(e.code))});
}

struct ApiServer::Prepared {
  CompletionRequest request;
  std::vector<int> prompt;
  size_t max_tokens = 0;
  std::optional<ToolCallWords> tool_call;  // tools offered: the answer's calls are read back in these words
  bool grammar_is_call = false;            // the grammar is a required call's (it spells the format's marks)
};

namespace {

// A tool call in OpenAI's shape; its id from the completion's, the choice's and its place
// in the answer, so ids are unique within a response.
json tool_call_json(const std::string& completion_id, size_t choice, size_t k, const ToolCall& call) {
  return {{"id", "call_" + completion_id + "_" + std::to_string(choice) + "_" + std::to_string(k)},
          {"type", "function"},
          {"function", {{"name", call.name}, {"arguments", call.arguments}}}};
}

}  // namespace

ApiServer::ApiServer(const Model& model, const Tokenizer* tokenizer, FfnBackend& ffn, ThreadPool& pool, ApiOptions options)
    : model_(model),
      tokenizer_(tokenizer),
      transformer_(model, ffn, pool),
      options_(std::move(options)),
      scheduler_(transformer_, {.parallel = std::max<size_t>(1, options_.parallel), .max_waiting = options_.max_queue,
                                .prefill_chunk = std::max<size_t>(1, options_.prefill_chunk),
                                .ctx = std::min(options_.ctx, model.config.context),
                                .speculative = options_.speculative, .draft_model = options_.draft_model, .draft_pool = &pool,
                                .cache_bytes = options_.cache_bytes, .fork_reach = options_.fork_reach}),
      created_(int64_t(std::time(nullptr))),
      first_token_seconds_(kFirstTokenBuckets),
      token_gap_seconds_(kTokenGapBuckets) {
  options_.ctx = std::min(options_.ctx, model.config.context);
  // Before any request: the engine thread reads the ranges only for a step, after a job's
  // submission has passed the scheduler's lock.
  if (auto s = transformer_.set_layer_ranges(options_.layer_ranges); !s) throw std::invalid_argument(s.error().message);
  if (options_.chat_format && tokenizer_) {
    const ChatFormatInfo& info = chat_format_info(*options_.chat_format);
    for (size_t id = 0; id < tokenizer_->vocab_size(); ++id) {
      const std::string piece = tokenizer_->piece(int(id));
      if (piece == info.end_of_turn) end_of_turn_.push_back(int(id));
      if (!info.tool_call.wait.empty() && piece == info.tool_call.wait) tool_wait_.push_back(int(id));
    }
  }
}

std::shared_ptr<const TokenTrie> ApiServer::token_trie(bool call_marks) const {
  std::call_once(trie_once_[call_marks], [this, call_marks] {
    const auto marks = call_marks && options_.chat_format ? chat_format_info(*options_.chat_format).tool_call.marks()
                                                          : std::vector<std::string_view>{};
    trie_[call_marks] = std::make_shared<const TokenTrie>(TokenTrie::of(*tokenizer_, marks));
  });
  return trie_[call_marks];
}

std::vector<Route> ApiServer::routes() {
  auto counted = [this](const char* endpoint, HttpReply reply) {
    std::lock_guard lock(metrics_mutex_);
    ++requests_[std::string(endpoint) + "\",status=\"" + std::to_string(reply.status)];
    return reply;
  };
  return {
      {"GET", "/v1/models", [this, counted](const HttpRequest&) { return counted("/v1/models", json_reply(models())); }},
      {"POST", "/v1/completions", [this, counted](const HttpRequest& r) { return counted("/v1/completions", complete(r, false)); }},
      {"POST", "/v1/chat/completions",
       [this, counted](const HttpRequest& r) { return counted("/v1/chat/completions", complete(r, true)); }},
      {"POST", "/tokenize", [this, counted](const HttpRequest& r) { return counted("/tokenize", tokenize(r)); }},
      {"POST", "/detokenize", [this, counted](const HttpRequest& r) { return counted("/detokenize", detokenize(r)); }},
      {"GET", "/health", [this](const HttpRequest&) { return json_reply({{"status", "ok"}, {"key_required", options_.key_required}}); },
       false},
      // The chat page (web/chat.html): open to all; its requests carry the key the user gives.
      {"GET", "/", [](const HttpRequest&) { return web_page_reply("chat"); }, false},
      {"GET", "/metrics", [this](const HttpRequest&) { return metrics_reply(metrics()); }},
  };
}

json ApiServer::models() const {
  return {{"object", "list"},
          {"data", json::array({{{"id", options_.model_id}, {"object", "model"}, {"created", created_}, {"owned_by", "larql"},
                                  {"max_model_len", options_.ctx}}})}};
}

std::variant<ApiServer::Prepared, OpenAiError> ApiServer::prepare(const CompletionRequest& r) const {
  Prepared p{r, {}, 0, {}, false};
  const char* param = r.chat ? "messages" : "prompt";
  if (r.chat) {
    if (!options_.chat_format)
      return OpenAiError{400, "this model has no chat template larql recognises; start larql api with --chat-template NAME "
                              "(llama3, llama2, chatml, gemma, gemma4, harmony), or use /v1/completions", "invalid_request_error",
                         "messages", "no_chat_template"};
    const bool offered = !r.tools.empty() && r.tool_choice != CompletionRequest::ToolChoice::none;
    const ToolCallWords& words = chat_format_info(*options_.chat_format).tool_call;
    auto text = render_chat(*options_.chat_format, r.messages, offered ? r.tools : std::vector<nlohmann::ordered_json>{});
    if (!text)  // (a format without tool calls refuses the tools, naming the format)
      return OpenAiError{400, text.error().message, "invalid_request_error", offered && !words.supported() ? "tools" : "messages", ""};
    p.prompt = tokenizer_->encode(*text);
    if (offered) p.tool_call = words;
    // A call required (of any tool, or the one named): the whole call is constrained, its
    // arguments by that function's parameters.
    if (r.tool_choice == CompletionRequest::ToolChoice::required || r.tool_choice == CompletionRequest::ToolChoice::named) {
      if (r.grammar)
        return OpenAiError{400, "response_format and a required tool call cannot both constrain the answer",
                           "invalid_request_error", "tool_choice", ""};
      std::vector<JsonGrammar::Function> functions;
      for (const auto& t : r.tools) {
        const auto& f = t["function"];
        if (r.tool_choice == CompletionRequest::ToolChoice::named && f["name"] != r.tool_name) continue;
        const bool schema = f.contains("parameters") && f["parameters"].is_object();
        functions.push_back({f["name"].get<std::string>(), schema ? &f["parameters"] : nullptr});
      }
      auto grammar = JsonGrammar::tool_call(functions, words.before, words.between, words.after, words.syntax);
      if (!grammar) return OpenAiError{400, grammar.error().message, "invalid_request_error", "tools", ""};
      p.request.grammar = *grammar;
      p.grammar_is_call = true;
    }
  } else if (const auto* text = std::get_if<std::string>(&r.prompt)) {
    p.prompt = tokenizer_->encode(*text);
  } else {
    p.prompt = std::get<std::vector<int>>(r.prompt);
    for (int id : p.prompt)
      if (id < 0 || size_t(id) >= model_.config.vocab)
        return OpenAiError{400, "token id " + std::to_string(id) + " is outside the vocabulary (0.." +
                                    std::to_string(model_.config.vocab - 1) + ")", "invalid_request_error", "prompt", ""};
  }
  if (p.prompt.empty()) return OpenAiError{400, "the prompt has no tokens", "invalid_request_error", param, ""};
  if (r.grammar && r.chat && options_.chat_format == ChatFormat::harmony)
    return OpenAiError{400, "response_format json_object/json_schema is not supported with the harmony chat format yet "
                            "(its answer comes after an analysis channel)", "invalid_request_error", "response_format", ""};
  for (const auto& [id, bias] : r.logit_bias)
    if (size_t(id) >= model_.config.vocab)
      return OpenAiError{400, "logit_bias names token " + std::to_string(id) + ", outside the vocabulary (0.." +
                                  std::to_string(model_.config.vocab - 1) + ")", "invalid_request_error", "logit_bias", ""};
  if (p.prompt.size() >= options_.ctx)
    return OpenAiError{400, "the prompt has " + std::to_string(p.prompt.size()) + " tokens; the context is " +
                                std::to_string(options_.ctx) + " (--ctx), which leaves no room for a completion",
                       "invalid_request_error", param, "context_length_exceeded"};
  const size_t room = options_.ctx - p.prompt.size();
  // OpenAI's defaults: 16 tokens for completions, up to the context for chat.
  p.max_tokens = std::min(r.max_tokens.value_or(r.chat ? room : 16), room);
  // A constrained answer must be able to close within max_tokens in this vocabulary; else
  // the request is refused now, never answered with an empty message.
  if (p.request.grammar) {
    const auto trie = token_trie(p.grammar_is_call);
    const JsonMatcher start(*p.request.grammar);
    if (trie->tokens_to_close(start, p.max_tokens) == SIZE_MAX) {
      const size_t needed = trie->tokens_to_close(start, std::max<size_t>(4096, 4 * p.max_tokens));
      return OpenAiError{400,
                         "max_tokens " + std::to_string(p.max_tokens) + " cannot hold the " +
                             (p.grammar_is_call ? std::string("tool call") : std::string("structured answer")) +
                             ": its shortest form takes " + (needed == SIZE_MAX ? std::string("more than that") : std::to_string(needed)) +
                             " tokens in this model's vocabulary",
                         "invalid_request_error", "max_tokens", ""};
    }
  }
  return p;
}

HttpReply ApiServer::complete(const HttpRequest& request, bool chat) {
  const auto arrived = Clock::now();
  auto parsed = parse_completion_request(request.body, chat);
  if (auto* e = std::get_if<OpenAiError>(&parsed)) return openai_error_reply(*e);
  if (!tokenizer_) return openai_error_reply({500, "the server has no tokenizer", "server_error", "", ""});
  auto prepared = prepare(std::get<CompletionRequest>(parsed));
  if (auto* e = std::get_if<OpenAiError>(&prepared)) return openai_error_reply(*e);
  Prepared p = std::move(std::get<Prepared>(prepared));
  // One job per choice, each its own sequence of the batch, choice i sampled with seed + i.
  const uint64_t seed = p.request.seed.value_or(std::random_device{}());
  // With tools offered, generation also ends where the model waits for their results.
  std::vector<int> ends = end_of_turn_;
  if (p.tool_call) ends.insert(ends.end(), tool_wait_.begin(), tool_wait_.end());
  std::vector<JobRequest> choices;
  for (size_t i = 0; i < p.request.n; ++i)
    choices.push_back({p.prompt, p.max_tokens,
                       {.temperature = p.request.temperature, .top_p = p.request.top_p, .seed = seed + i,
                        .top_k = p.request.top_k, .min_p = p.request.min_p,
                        .repetition_penalty = p.request.repetition_penalty,
                        .presence_penalty = p.request.presence_penalty,
                        .frequency_penalty = p.request.frequency_penalty, .logit_bias = p.request.logit_bias},
                       ends, p.request.top_logprobs, p.request.echo, p.request.grammar,
                       p.request.grammar ? token_trie(p.grammar_is_call) : nullptr});
  // The choices join the batch together (over session shards they then share one prefill).
  const std::vector<std::shared_ptr<Job>> jobs = scheduler_.submit_together(std::move(choices));
  if (jobs.empty())
    return openai_error_reply({429, "too many requests waiting (--max-queue " + std::to_string(options_.max_queue) +
                                        "); retry after the Retry-After seconds", "rate_limit_exceeded", "", "queue_full"});
  auto cancel_all = [jobs] {
    for (const auto& job : jobs) job->cancel();
  };
  const std::string id = (chat ? "chatcmpl-" : "cmpl-") + std::to_string(next_id_++);
  const int64_t created = int64_t(std::time(nullptr));

  // The request's tokens as the engine makes them, turned into text on this thread. `emit`
  // gets each piece of text as it becomes final (content, or a harmony answer's reasoning)
  // with the log-probabilities of the tokens generated since the last content piece (when
  // asked for) and the tool calls completed with it (when tools are offered), and returns
  // false when the client is gone; the result is the finish reason, or an error. The job
  // is cancelled when it ends early.
  struct Outcome {
    std::string finish_reason;
    size_t completion_tokens = 0;
    std::optional<Error> error;
    std::vector<TokenLogprobs> unsent_logprobs;  // of tokens whose text no piece carried (held, then cut by a stop)
  };
  // A harmony chat answers in channels: the final one is its content, the analysis one its
  // reasoning (stop strings apply to the content).
  const bool harmony = chat && options_.chat_format == ChatFormat::harmony;
  using Emit = std::function<bool(const std::string& piece, bool reasoning, std::span<const TokenLogprobs> logprobs,
                                  std::span<const ToolCall> calls)>;
  // echo: the prompt's text (as given, or its ids decoded) goes first, with its tokens'
  // log-probabilities when asked for (the first token has none: null).
  std::string echoed;
  if (p.request.echo)
    echoed = std::holds_alternative<std::string>(p.request.prompt) ? std::get<std::string>(p.request.prompt) : tokenizer_->decode(p.prompt);
  auto run = [this, stop = p.request.stop, last_prompt = p.prompt.back(), prompt_tokens = p.prompt.size(), arrived, harmony,
              client_gone = request.client_gone, echoed, first_prompt = p.prompt.front(),
              echo_logprobs = p.request.echo && p.request.top_logprobs,
              tool_call = p.tool_call](const std::shared_ptr<Job>& job, const Emit& emit) {
    Outcome out;
    if (!echoed.empty() && !echo_logprobs && !emit(echoed, false, {}, {})) {
      job->cancel();
      return out;
    }
    StopStrings stops(stop);
    TextStream text(*tokenizer_, last_prompt);
    HarmonyChannels channels;
    std::string reasoning;  // a harmony answer's, passed on with the next content or at the end
    std::vector<ToolCall> channel_calls;  // a harmony answer's calls (its commentary to functions), passed on likewise
    bool channel_called = false;
    auto shown = [&](std::string piece) {
      if (!harmony) return piece;
      HarmonyChannels::Text t = channels.push(piece);
      reasoning += t.reasoning;
      if (tool_call) channel_calls.insert(channel_calls.end(), t.calls.begin(), t.calls.end());  // (tools offered)
      return t.content;
    };
    std::vector<TokenLogprobs> pending;  // the log-probabilities of tokens whose text is not out yet
    auto pass_reasoning = [&] {
      const bool ok = reasoning.empty() || emit(reasoning, true, {}, {});
      reasoning.clear();
      return ok;
    };
    // Tools offered: the content is read for calls before it is passed on.
    std::optional<ToolCallParser> calls;
    if (tool_call && !harmony) calls.emplace(*tool_call);
    auto pass = [&](const ToolCallParser::Out& o) {
      if (o.content.empty() && o.calls.empty()) return true;
      const bool ok = emit(o.content, false, pending, o.calls);
      pending.clear();
      return ok;
    };
    auto pass_content = [&](const std::string& piece, bool last = false) {
      if (!calls) {
        channel_called |= !channel_calls.empty();
        return pass({piece, std::exchange(channel_calls, {})});
      }
      return pass(calls->push(piece)) && (!last || pass(calls->finish()));
    };
    // An answer that ended by itself.
    auto stopped = [&] { return (calls && calls->called()) || channel_called ? "tool_calls" : "stop"; };
    Clock::time_point previous_token;
    for (;;) {
      const auto event = job->next(std::chrono::milliseconds(50));
      if (!event) {
        if (client_gone && client_gone()) {  // polled: a waiting or slow client has no event to wake us
          job->cancel();
          return out;
        }
        continue;
      }
      if (event->prompt_logprobs) {
        std::vector<TokenLogprobs> scored{{first_prompt, std::numeric_limits<float>::quiet_NaN(), {}}};
        scored.insert(scored.end(), event->prompt_logprobs->begin(), event->prompt_logprobs->end());
        if (!emit(echoed, false, scored, {})) {
          job->cancel();
          return out;
        }
        continue;
      }
      if (event->token) {
        if (client_gone && client_gone()) {  // also between tokens: a whole answer nobody will read is not worth finishing
          job->cancel();
          return out;
        }
        {
          std::lock_guard lock(metrics_mutex_);
          const bool first = out.completion_tokens++ == 0;
          (first ? first_token_seconds_ : token_gap_seconds_)
              .observe(std::chrono::duration<double>(event->at - (first ? arrived : previous_token)).count());
          previous_token = event->at;
        }
        if (event->logprobs) pending.push_back(std::move(*event->logprobs));
        const std::string piece = stops.push(shown(text.push(*event->token)));
        if (!pass_reasoning() || !pass_content(piece)) {
          job->cancel();
          return out;
        }
        if (stops.stopped()) {
          job->cancel();
          pass_content("", true);
          out.unsent_logprobs = std::move(pending);
          out.finish_reason = stopped();
          break;
        }
        continue;
      }
      if (event->end == Job::End::error) {  // keeps its code: a shard unreachable is a 502, not ours to hide
        out.error = event->error.value_or(Error{ErrorCode::internal, "the engine failed"});
        return out;
      }
      std::string last = shown(text.finish());
      if (harmony) {
        HarmonyChannels::Text t = channels.finish();
        last += t.content;
        reasoning += t.reasoning;
        if (tool_call) channel_calls.insert(channel_calls.end(), t.calls.begin(), t.calls.end());
      }
      const std::string rest = stops.push(last) + stops.finish();
      pass_reasoning();
      pass_content(rest, true);
      out.unsent_logprobs = std::move(pending);
      out.finish_reason = stops.stopped() || event->end == Job::End::eos ? stopped() : "length";
      break;
    }
    std::lock_guard lock(metrics_mutex_);
    prompt_tokens_ += prompt_tokens;
    completion_tokens_ += out.completion_tokens;
    return out;
  };
  // (The prompt is counted once, as OpenAI counts it for n choices; its cached tokens are
  // the first choice's, known once its events have come.)
  auto usage = [prompt_tokens = p.prompt.size(), first = jobs.front()](size_t completion) {
    return json{{"prompt_tokens", prompt_tokens},
                {"completion_tokens", completion},
                {"total_tokens", prompt_tokens + completion},
                {"prompt_tokens_details", {{"cached_tokens", first->cached_tokens()}}}};
  };

  const bool want_logprobs = p.request.top_logprobs.has_value();
  // A choice's logprobs field: null unless asked for.
  auto logprobs_json = [this, chat, want_logprobs](std::span<const TokenLogprobs> tokens, size_t& text_offset) -> json {
    if (!want_logprobs) return nullptr;
    if (chat) return {{"content", chat_logprobs(*tokenizer_, tokens)}, {"refusal", nullptr}};
    return completion_logprobs(*tokenizer_, tokens, text_offset);
  };

  if (!p.request.stream) {
    // The choices' jobs run together in the engine; their events are read here in turn.
    json choices = json::array();
    size_t completion_tokens = 0;
    for (size_t i = 0; i < jobs.size(); ++i) {
      std::string text, reasoning;
      std::vector<TokenLogprobs> logprobs;
      json tool_calls = json::array();
      const Outcome o = run(jobs[i], [&](const std::string& piece, bool is_reasoning, std::span<const TokenLogprobs> tokens,
                                         std::span<const ToolCall> calls) {
        (is_reasoning ? reasoning : text) += piece;
        logprobs.insert(logprobs.end(), tokens.begin(), tokens.end());
        for (const auto& c : calls) tool_calls.push_back(tool_call_json(id, i, tool_calls.size(), c));
        return true;
      });
      if (o.error) {
        cancel_all();
        return openai_error_for(*o.error);
      }
      logprobs.insert(logprobs.end(), o.unsent_logprobs.begin(), o.unsent_logprobs.end());
      completion_tokens += o.completion_tokens;
      size_t text_offset = 0;
      json message{{"role", "assistant"}, {"content", text}};
      if (!reasoning.empty()) message["reasoning_content"] = reasoning;
      if (!tool_calls.empty()) {
        message["tool_calls"] = tool_calls;
        if (text.empty()) message["content"] = nullptr;  // as OpenAI answers a call without text
      }
      choices.push_back({{"index", i}, {chat ? "message" : "text", chat ? message : json(text)},
                         {"logprobs", logprobs_json(logprobs, text_offset)}, {"finish_reason", o.finish_reason}});
    }
    return json_reply({{"id", id},
                       {"object", chat ? "chat.completion" : "text_completion"},
                       {"created", created},
                       {"model", options_.model_id},
                       {"choices", choices},
                       {"usage", usage(completion_tokens)}});
  }

  // Server-Sent Events: one chunk per piece of text, a last one with the finish reason,
  // usage if asked for, then [DONE]. The turn is held until the stream ends.
  HttpReply reply{200, "text/event-stream", ""};
  reply.headers = {{"Cache-Control", "no-cache"}};
  // Several choices stream one after the other, each chunk naming its choice's index.
  reply.stream = [this, run, usage, id, created, chat, include_usage = p.request.include_usage, logprobs_json, jobs, cancel_all,
                  client_gone = request.client_gone](const StreamSend& send) {
    size_t text_offset = 0, index = 0;
    auto chunk = [&](const json& delta_or_text, const json& finish, std::span<const TokenLogprobs> tokens = {}) {
      const json choice{{"index", index}, {chat ? "delta" : "text", delta_or_text},
                        {"logprobs", logprobs_json(tokens, text_offset)}, {"finish_reason", finish}};
      return json{{"id", id},
                  {"object", chat ? "chat.completion.chunk" : "text_completion"},
                  {"created", created},
                  {"model", options_.model_id},
                  {"choices", json::array({choice})}};
    };
    size_t completion_tokens = 0;
    for (; index < jobs.size(); ++index) {
      text_offset = 0;
      if (chat && !send(sse(chunk({{"role", "assistant"}, {"content", ""}}, nullptr)))) return cancel_all();
      size_t calls_sent = 0;
      const Outcome o = run(jobs[index], [&](const std::string& piece, bool reasoning, std::span<const TokenLogprobs> tokens,
                                             std::span<const ToolCall> calls) {
        if (client_gone && client_gone()) return false;
        if (!chat) return send(sse(chunk(json(piece), nullptr, tokens)));
        json delta = json::object();
        if (!piece.empty()) delta[reasoning ? "reasoning_content" : "content"] = piece;
        if (!calls.empty()) {
          delta["tool_calls"] = json::array();
          for (const auto& c : calls) {
            json call = tool_call_json(id, index, calls_sent, c);
            call["index"] = calls_sent++;
            delta["tool_calls"].push_back(std::move(call));
          }
        }
        return send(sse(chunk(delta, nullptr, tokens)));
      });
      if (o.error) {
        send(sse(error_json({http_status(o.error->code), o.error->message, "server_error", "",
                              std::string(error_code_name(o.error->code))})));
        return cancel_all();
      }
      if (o.finish_reason.empty()) return cancel_all();
      if (!send(sse(chunk(chat ? json::object() : json(""), o.finish_reason, o.unsent_logprobs)))) return cancel_all();
      completion_tokens += o.completion_tokens;
    }
    if (include_usage) {
      json last = chunk(json::object(), nullptr);
      last["choices"] = json::array();
      last["usage"] = usage(completion_tokens);
      if (!send(sse(last))) return;
    }
    send("data: [DONE]\n\n");
  };
  return reply;
}

// llama-server's: {"content", "add_special"?, "with_pieces"?} → {"tokens": [ids]} (or
// [{"id", "piece"}] with pieces). add_special (default false) keeps the BOS the
// tokenizer adds; without it, the text's own tokens only.
HttpReply ApiServer::tokenize(const HttpRequest& request) const {
  const json j = json::parse(request.body, nullptr, false);
  if (!j.is_object() || !j.contains("content") || !j["content"].is_string())
    return openai_error_reply({400, "the body must be {\"content\": \"text\"}", "invalid_request_error", "content", ""});
  for (const char* key : {"add_special", "with_pieces"})
    if (j.contains(key) && !j[key].is_boolean())
      return openai_error_reply({400, std::string(key) + " must be true or false", "invalid_request_error", key, ""});
  if (!tokenizer_) return openai_error_reply({500, "the server has no tokenizer", "server_error", "", ""});
  std::vector<int> ids = tokenizer_->encode(j["content"].get<std::string>());
  if (!j.value("add_special", false) && !ids.empty() && ids.front() == model_.config.bos_id) ids.erase(ids.begin());
  json tokens = json::array();
  for (int id : ids)
    tokens.push_back(j.value("with_pieces", false) ? json{{"id", id}, {"piece", tokenizer_->token_text(id)}} : json(id));
  return json_reply({{"tokens", tokens}});
}

// llama-server's: {"tokens": [ids]} → {"content": text}.
HttpReply ApiServer::detokenize(const HttpRequest& request) const {
  const json j = json::parse(request.body, nullptr, false);
  if (!j.is_object() || !j.contains("tokens") || !j["tokens"].is_array())
    return openai_error_reply({400, "the body must be {\"tokens\": [ids]}", "invalid_request_error", "tokens", ""});
  std::vector<int> ids;
  for (const json& id : j["tokens"]) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || size_t(id.get<int64_t>()) >= model_.config.vocab)
      return openai_error_reply({400, "token " + id.dump() + " is not an id of the vocabulary (0.." +
                                          std::to_string(model_.config.vocab - 1) + ")", "invalid_request_error", "tokens", ""});
    ids.push_back(int(id.get<int64_t>()));
  }
  if (!tokenizer_) return openai_error_reply({500, "the server has no tokenizer", "server_error", "", ""});
  return json_reply({{"content", tokenizer_->decode(ids)}});
}

std::string ApiServer::metrics() const {
  std::lock_guard lock(metrics_mutex_);
  std::ostringstream o;
  o << "# HELP larql_api_requests_total Requests answered, by endpoint and status.\n# TYPE larql_api_requests_total counter\n";
  for (const auto& [key, n] : requests_) o << "larql_api_requests_total{endpoint=\"" << key << "\"} " << n << "\n";
  o << "# TYPE larql_api_prompt_tokens_total counter\nlarql_api_prompt_tokens_total " << prompt_tokens_ << "\n";
  o << "# TYPE larql_api_completion_tokens_total counter\nlarql_api_completion_tokens_total " << completion_tokens_ << "\n";
  const BatchScheduler::Stats st = scheduler_.stats();
  o << "# HELP larql_api_queue_waiting Requests waiting for a place in the batch.\n# TYPE larql_api_queue_waiting gauge\n"
    << "larql_api_queue_waiting " << st.waiting << "\n";
  o << "# HELP larql_api_running Sequences decoding together.\n# TYPE larql_api_running gauge\nlarql_api_running " << st.active
    << "\n";
  o << "# HELP larql_api_kv_cache_bytes Keys and values the running sequences hold (f32; sliding layers about their "
       "window).\n# TYPE larql_api_kv_cache_bytes gauge\nlarql_api_kv_cache_bytes "
    << st.kv_cache_bytes << "\n";
  o << "# HELP larql_api_engine_steps_total Batched forward passes (one FFN call per layer each).\n"
    << "# TYPE larql_api_engine_steps_total counter\nlarql_api_engine_steps_total " << st.steps << "\n";
  o << "# HELP larql_api_draft_tokens_total Speculative tokens drafted (--draft), and those kept.\n"
    << "# TYPE larql_api_draft_tokens_total counter\nlarql_api_draft_tokens_total " << st.drafted << "\n"
    << "# TYPE larql_api_draft_tokens_accepted_total counter\nlarql_api_draft_tokens_accepted_total " << st.accepted << "\n";
  o << "# HELP larql_api_time_to_first_token_seconds From a request's arrival (queue included) to its first token.\n"
    << "# TYPE larql_api_time_to_first_token_seconds histogram\n";
  first_token_seconds_.render(o, "larql_api_time_to_first_token_seconds");
  o << "# HELP larql_api_time_per_output_token_seconds Time between a sequence's tokens after the first.\n"
    << "# TYPE larql_api_time_per_output_token_seconds histogram\n";
  token_gap_seconds_.render(o, "larql_api_time_per_output_token_seconds");
  const PrefixCache::Stats& pc = st.prefix_cache;
  o << "# HELP larql_api_prefix_cache_bytes What the prompt prefix cache holds (allocated), and its bound (--cache-bytes).\n"
    << "# TYPE larql_api_prefix_cache_bytes gauge\nlarql_api_prefix_cache_bytes " << pc.bytes << "\n"
    << "# TYPE larql_api_prefix_cache_limit_bytes gauge\nlarql_api_prefix_cache_limit_bytes " << options_.cache_bytes << "\n"
    << "# HELP larql_api_prefix_cache_sequences Sequences the prefix cache keeps.\n"
    << "# TYPE larql_api_prefix_cache_sequences gauge\nlarql_api_prefix_cache_sequences " << pc.sequences << "\n"
    << "# HELP larql_api_prefix_cache_lookups_total Prompts looked up, those that found a prefix, and the prompt tokens it gave.\n"
    << "# TYPE larql_api_prefix_cache_lookups_total counter\nlarql_api_prefix_cache_lookups_total " << pc.lookups << "\n"
    << "# TYPE larql_api_prefix_cache_hits_total counter\nlarql_api_prefix_cache_hits_total " << pc.hits << "\n"
    << "# TYPE larql_api_prefix_cache_tokens_total counter\nlarql_api_prefix_cache_tokens_total " << pc.tokens_reused << "\n"
    << "# HELP larql_api_prefix_cache_evictions_total Sequences dropped to stay within the bound.\n"
    << "# TYPE larql_api_prefix_cache_evictions_total counter\nlarql_api_prefix_cache_evictions_total " << pc.evicted << "\n";
  if (options_.session_replays)
    o << "# HELP larql_api_session_replays_total Sequences rebuilt on new sessions after theirs were lost (--remote-layers).\n"
      << "# TYPE larql_api_session_replays_total counter\nlarql_api_session_replays_total " << options_.session_replays() << "\n";
  return o.str();
}

}  // namespace larql
