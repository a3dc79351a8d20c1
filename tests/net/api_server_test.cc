// `larql api` as users meet it, with real processes on loopback: OpenAI's official Node
// client streams a completion and a chat completion from it in front of two shards and a
// router (f32 wire), and the greedy text equals `larql run`'s; the plain HTTP forms, the
// errors in OpenAI's shape and the key; the bounded queue (429 with Retry-After), and a
// client that leaves, waiting or mid-stream, giving its place up.
#include <gtest/gtest.h>

#include <httplib.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <thread>

#include "api/chat_template.h"
#include "model/hf_tokenizer.h"
#include "support/command.h"
#include "support/demo_model.h"
#include "support/eventually.h"
#include "support/reference_fixtures.h"
#include "support/gated_proxy.h"
#include "support/js_tokenizers.h"
#include "support/process.h"
#include "support/prometheus.h"
#include "support/raw_socket.h"

namespace larql {
namespace {

using nlohmann::json;
using test::ChildProcess;

constexpr const char* kKey = "api-test-key";

// What `larql run` generates locally for these arguments: {"text", "generated_ids"}.
json larql_run(const std::string& args) {
  const auto r = test::run_command(std::string(LARQL_BINARY) + " run " + test::kDemo + " --json --threads 1 " + args);
  EXPECT_EQ(r.status, 0) << r.output;
  return r.status == 0 ? json::parse(r.output.substr(r.output.find('{'))) : json::object();
}

std::string ids_arg(const std::vector<int>& ids) {
  std::string out;
  for (int id : ids) {
    if (!out.empty()) out += ',';
    out += std::to_string(id);
  }
  return out;
}

// A POST request's bytes, for a raw connection the test can close mid-way.
std::string raw_post(const std::string& path, const json& body) {
  const std::string text = body.dump();
  std::string out = "POST ";
  out.append(path).append(" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ");
  out.append(std::to_string(text.size())).append("\r\n\r\n").append(text);
  return out;
}

httplib::Result post(const std::string& url, const std::string& path, const json& body, const char* key = kKey) {
  httplib::Client c(url);
  c.set_read_timeout(60);
  if (key) c.set_bearer_token_auth(key);
  return c.Post(path, body.dump(), "application/json");
}

TEST(ApiServer, OpenAiNodeClientStreamsThroughTwoShardsAndARouter) {
  ASSERT_TRUE(std::filesystem::exists(test::js_cache() / "node_modules/openai"))
      << "the openai npm package is missing: scripts/install-js-tokenizers.sh installs it (make test runs it)";
  ChildProcess low({"serve", test::kDemo, "--port", "0", "--layers", "0-2", "--threads", "1"});
  ChildProcess high({"serve", test::kDemo, "--port", "0", "--layers", "3-5", "--threads", "1"});
  ChildProcess router({"router", "--port", "0", "--shards", "0-2=" + low.url() + ",3-5=" + high.url()});
  ChildProcess api({"api", test::kDemo, "--port", "0", "--ffn", router.url(), "--wire", "f32", "--chat-template", "chatml",
                    "--api-key", kKey, "--threads", "1"});
  EXPECT_NE(api.startup_line().find("chat chatml"), std::string::npos) << api.startup_line();

  const std::string prompt = "And the LORD said unto Moses,", message = "Who made the heaven?";
  const size_t steps = 24;
  const auto r = test::run_command("NODE_PATH='" + (test::js_cache() / "node_modules").string() + "' node '" LARQL_SOURCE_DIR
                                   "/tests/api/openai_client.js' '" + api.url() + "/v1' '" + kKey + "' '" + prompt + "' '" +
                                   message + "' " + std::to_string(steps));
  ASSERT_EQ(r.status, 0) << r.output;
  const json got = json::parse(r.output);

  EXPECT_EQ(got["models"], json::array({"demo"}));
  const json expected = larql_run("--prompt '" + prompt + "' --steps " + std::to_string(steps));
  EXPECT_EQ(got["completion"], expected["text"]) << "streamed greedy completion = larql run (f32 wire: bit-identical)";
  EXPECT_EQ(got["completion_finish"], expected["generated_ids"].size() == steps ? "length" : "stop");

  // The chat prompt as the chatml format renders it, tokenized as the server does.
  auto tok = HfTokenizer::load(test::kDemo + "/tokenizer.json");
  ASSERT_TRUE(tok.ok());
  const auto rendered = render_chat(ChatFormat::chatml, {{"user", message}});
  ASSERT_TRUE(rendered.ok());
  const auto prompt_ids = (*tok)->encode(*rendered);
  const json chat_expected = larql_run("--prompt-ids " + ids_arg(prompt_ids) + " --steps " + std::to_string(steps));
  EXPECT_EQ(got["chat_stream"], chat_expected["text"]);
  EXPECT_EQ(got["chat"], chat_expected["text"]) << "streamed and whole answers agree";
  EXPECT_EQ(got["usage"]["prompt_tokens"], prompt_ids.size());
  EXPECT_EQ(got["usage"]["completion_tokens"], chat_expected["generated_ids"].size());
  EXPECT_EQ(got["usage"]["total_tokens"], prompt_ids.size() + chat_expected["generated_ids"].size());
  for (const char* field : {"prompt_tokens", "completion_tokens", "total_tokens"})
    EXPECT_EQ(got["stream_usage"][field], got["usage"][field]) << "stream_options.include_usage: " << field;
  // The streamed chat ran first: the whole one, the same prompt, continues from its cache.
  EXPECT_EQ(got["usage"]["prompt_tokens_details"]["cached_tokens"], prompt_ids.size() - 1) << got["usage"].dump();
  std::printf("through the router: completion %s\n", got["completion"].dump().c_str());
}

// Log-probabilities through the Node client: the chosen tokens' and the top 5, against
// PyTorch's log-softmax of the demo model (tools/demo_logprobs.py, committed), whole and
// streamed alike; chat's entries equal a completion's of the prompt chat renders.
TEST(ApiServer, LogprobsEqualPyTorchsLogSoftmaxThroughTheNodeClient) {
  std::ifstream in(std::string(LARQL_SOURCE_DIR) + "/tests/data/demo_logprobs.json");
  const json oracle = json::parse(in)["prompts"][1];
  const json steps = oracle["steps"];
  ChildProcess api({"api", test::kDemo, "--port", "0", "--chat-template", "chatml", "--api-key", kKey, "--threads", "1"});
  const std::string message = "Who made the heaven?";
  auto tok = HfTokenizer::load(test::kDemo + "/tokenizer.json");
  ASSERT_TRUE(tok.ok());
  const auto rendered = render_chat(ChatFormat::chatml, {{"user", message}});
  ASSERT_TRUE(rendered.ok());
  std::vector<int> scored_ids = oracle["prompt_ids"].get<std::vector<int>>();  // the prompt and its greedy answer
  for (const json& step : steps) scored_ids.push_back(step["token"].get<int>());
  const auto r = test::run_command("NODE_PATH='" + (test::js_cache() / "node_modules").string() + "' node '" LARQL_SOURCE_DIR
                                   "/tests/api/openai_logprobs.js' '" + api.url() + "/v1' '" + kKey + "' '" +
                                   ids_arg(oracle["prompt_ids"].get<std::vector<int>>()) + "' '" + message + "' '" +
                                   ids_arg((*tok)->encode(*rendered)) + "' " + std::to_string(steps.size()) + " '" +
                                   ids_arg(scored_ids) + "'");
  ASSERT_EQ(r.status, 0) << r.output;
  const json got = json::parse(r.output);

  const json& c = got["completion"];
  ASSERT_EQ(c["token_logprobs"].size(), steps.size()) << c.dump();
  double worst = 0;
  size_t offset = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    const json& step = steps[i];
    const std::string text = (*tok)->decode(std::vector<int>{step["token"].get<int>()});
    EXPECT_EQ(c["tokens"][i], text) << i;
    EXPECT_EQ(c["text_offset"][i], offset) << i;
    offset += text.size();
    worst = std::max(worst, std::fabs(c["token_logprobs"][i].get<double>() - step["logprob"].get<double>()));
    ASSERT_EQ(c["top_logprobs"][i].size(), 5u) << c["top_logprobs"][i].dump();
    for (const json& alt : step["top"]) {
      const std::string alt_text = (*tok)->decode(std::vector<int>{alt[0].get<int>()});
      ASSERT_TRUE(c["top_logprobs"][i].contains(alt_text)) << i << ": " << alt_text;
      worst = std::max(worst, std::fabs(c["top_logprobs"][i][alt_text].get<double>() - alt[1].get<double>()));
    }
  }
  // f32 on both sides over the same bf16 weights; the sums run in other orders.
  EXPECT_LT(worst, 1e-5) << "largest |larql − PyTorch| log-probability";
  std::printf("logprobs: largest |larql - PyTorch| %.2e over %zu tokens and their top 5\n", worst, steps.size());
  EXPECT_EQ(got["completion_text"], got["streamed"]["text"]);
  for (const char* key : {"tokens", "token_logprobs", "top_logprobs", "text_offset"})
    EXPECT_EQ(got["streamed"][key], c[key]) << key << ": streamed and whole alike";

  const json& chat = got["chat"];
  const json& same = got["chat_as_completion"];
  ASSERT_EQ(chat.size(), same["token_logprobs"].size());
  for (size_t i = 0; i < chat.size(); ++i) {
    EXPECT_EQ(chat[i]["token"], same["tokens"][i]) << i;
    EXPECT_EQ(chat[i]["logprob"], same["token_logprobs"][i]) << i;
    std::vector<int> bytes;
    for (unsigned char b : chat[i]["token"].get<std::string>()) bytes.push_back(b);
    EXPECT_EQ(chat[i]["bytes"], bytes) << i;
    ASSERT_EQ(chat[i]["top_logprobs"].size(), 5u);
    EXPECT_EQ(chat[i]["top_logprobs"][0]["logprob"], chat[i]["logprob"]) << "greedy: the chosen token is the most likely";
  }
  EXPECT_TRUE(got["chat_without"].is_null()) << "no logprobs unless asked for";

  // echo + logprobs + max_tokens 0: the answer's tokens scored in one prefill have the
  // log-probabilities they had when generated (PyTorch's), the first prompt token none.
  const json& scored = got["scored"];
  const size_t prompt_size = oracle["prompt_ids"].size();
  ASSERT_EQ(scored["token_logprobs"].size(), scored_ids.size()) << scored.dump();
  EXPECT_TRUE(scored["token_logprobs"][0].is_null() && scored["top_logprobs"][0].is_null());
  EXPECT_EQ(got["scored_finish"], "length");
  double scored_worst = 0;
  for (size_t i = 0; i < steps.size(); ++i)
    scored_worst = std::max(scored_worst, std::fabs(scored["token_logprobs"][prompt_size + i].get<double>() - steps[i]["logprob"].get<double>()));
  EXPECT_LT(scored_worst, 1e-5) << "the answer scored by echo against PyTorch";
  for (size_t i = 1; i < prompt_size; ++i) EXPECT_TRUE(scored["token_logprobs"][i].is_number()) << i;
}

TEST(ApiServer, SamplingParametersReachTheEngine) {
  ChildProcess api({"api", test::kDemo, "--port", "0", "--api-key", kKey, "--threads", "1"});
  auto tok = HfTokenizer::load(test::kDemo + "/tokenizer.json");
  ASSERT_TRUE(tok.ok());
  // A bias of +100 on one token makes it greedy's every choice.
  auto res = post(api.url(), "/v1/completions",
                  {{"prompt", "In the beginning"}, {"max_tokens", 3}, {"temperature", 0}, {"logit_bias", {{"500", 100}}}});
  ASSERT_TRUE(res && res->status == 200) << (res ? res->body : "no response");
  EXPECT_EQ(json::parse(res->body)["choices"][0]["text"], (*tok)->decode(std::vector<int>{500, 500, 500}));
  // A strong repetition penalty changes a greedy answer that repeats (the demo model's does).
  const json plain{{"prompt", "In the beginning"}, {"max_tokens", 24}, {"temperature", 0}};
  json penalised = plain;
  penalised["repetition_penalty"] = 5.0;
  auto a = post(api.url(), "/v1/completions", plain), b = post(api.url(), "/v1/completions", penalised);
  ASSERT_TRUE(a && b && a->status == 200 && b->status == 200);
  EXPECT_NE(json::parse(a->body)["choices"][0]["text"], json::parse(b->body)["choices"][0]["text"]);
  // The same seed, top-k and min-p: the same sampled text.
  json sampled{{"prompt", "In the beginning"}, {"max_tokens", 16}, {"temperature", 1.2}, {"top_k", 20}, {"min_p", 0.05}, {"seed", 9}};
  auto s1 = post(api.url(), "/v1/completions", sampled), s2 = post(api.url(), "/v1/completions", sampled);
  ASSERT_TRUE(s1 && s2 && s1->status == 200 && s2->status == 200);
  EXPECT_EQ(json::parse(s1->body)["choices"][0]["text"], json::parse(s2->body)["choices"][0]["text"]);
  // A bias on a token the model does not have: a 400 naming logit_bias.
  res = post(api.url(), "/v1/completions", {{"prompt", "a"}, {"logit_bias", {{"99999", 1}}}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  EXPECT_EQ(json::parse(res->body)["error"]["param"], "logit_bias");
}

// The prompt prefix cache as a client sees it: a second turn that resends the first
// (prompt and answer) reports the tokens it reused in usage.prompt_tokens_details, gives the
// text a server without the cache gives, and /metrics counts the hit; --cache-bytes 0 keeps
// nothing and says so at start-up.
TEST(ApiServer, ASecondTurnReusesTheFirstsKeysAndValues) {
  ChildProcess cached({"api", test::kDemo, "--port", "0", "--threads", "1"});
  ChildProcess plain({"api", test::kDemo, "--port", "0", "--threads", "1", "--cache-bytes", "0"});
  EXPECT_NE(cached.startup_line().find("prefix cache "), std::string::npos) << cached.startup_line();
  EXPECT_NE(plain.startup_line().find("prefix cache off"), std::string::npos) << plain.startup_line();
  std::string prompt = "And God said, Let there be light: and there was light.";
  for (int turn = 0; turn < 2; ++turn) {
    const json body{{"prompt", prompt}, {"max_tokens", 12}, {"temperature", 0}, {"logprobs", 2}};
    auto a = post(cached.url(), "/v1/completions", body, nullptr), b = post(plain.url(), "/v1/completions", body, nullptr);
    ASSERT_TRUE(a && b && a->status == 200 && b->status == 200) << (a ? a->body : "");
    const json with = json::parse(a->body), without = json::parse(b->body);
    EXPECT_EQ(with["choices"], without["choices"]) << "turn " << turn << ": text and log-probabilities as without the cache";
    EXPECT_EQ(without["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
    if (turn == 1) {
      EXPECT_GT(with["usage"]["prompt_tokens_details"]["cached_tokens"].get<size_t>(), 12u) << with["usage"].dump();
    }
    prompt += with["choices"][0]["text"].get<std::string>() + " And the evening and the morning were the first day.";
  }
  EXPECT_EQ(test::server_metric(cached.url(), "larql_api_prefix_cache_hits_total"), 1);
  EXPECT_GT(test::server_metric(cached.url(), "larql_api_prefix_cache_bytes"), 0);
  EXPECT_EQ(test::server_metric(plain.url(), "larql_api_prefix_cache_lookups_total"), 0);
  EXPECT_EQ(test::server_metric(plain.url(), "larql_api_prefix_cache_bytes"), 0);
}

// Clients at once, their prompts sharing prefixes in every way, against a prefix cache a
// few sequences big: evictions race new requests, and every answer equals one from a server
// without the cache.
TEST(ApiServer, ACacheEvictingUnderConcurrentClientsKeepsEveryAnswer) {
  ChildProcess cached({"api", test::kDemo, "--port", "0", "--threads", "1", "--parallel", "4", "--cache-bytes", "3000000"});
  ChildProcess plain({"api", test::kDemo, "--port", "0", "--threads", "1", "--parallel", "4", "--cache-bytes", "0"});
  const std::vector<std::string> stems{"And God said, Let there be light: and there was light. ",
                                       "In the beginning God created the heaven and the earth. ",
                                       "And the LORD said unto Moses, "};
  auto prompt_of = [&](size_t client, size_t i) {
    std::string p = stems[(client + i) % stems.size()];
    for (size_t k = 0; k <= (client * 7 + i) % 4; ++k) p += stems[(i + k) % stems.size()];
    return p + "And " + std::to_string(i % 3);
  };
  std::vector<std::vector<std::string>> got(4), want(4);
  auto ask = [](const ChildProcess& server, const std::string& prompt) {
    auto r = post(server.url(), "/v1/completions", {{"prompt", prompt}, {"max_tokens", 8}, {"temperature", 0}}, nullptr);
    return r && r->status == 200 ? json::parse(r->body)["choices"][0]["text"].get<std::string>() : std::string("(failed)");
  };
  std::vector<std::thread> clients;
  for (size_t c = 0; c < 4; ++c)
    clients.emplace_back([&, c] {
      for (size_t i = 0; i < 12; ++i) got[c].push_back(ask(cached, prompt_of(c, i)));
    });
  for (auto& t : clients) t.join();
  for (size_t c = 0; c < 4; ++c)
    for (size_t i = 0; i < 12; ++i) EXPECT_EQ(got[c][i], ask(plain, prompt_of(c, i))) << "client " << c << ", request " << i;
  EXPECT_GT(test::server_metric(cached.url(), "larql_api_prefix_cache_evictions_total"), 0);
  EXPECT_GT(test::server_metric(cached.url(), "larql_api_prefix_cache_hits_total"), 0);
  EXPECT_LE(test::server_metric(cached.url(), "larql_api_prefix_cache_bytes"), 3000000);
}

TEST(ApiServer, SeveralChoicesAreSequencesOfTheBatchSeededInTurn) {
  // Choice i is sampled with seed + i, whatever runs beside it: the same texts from a server
  // that decodes 8 sequences together and from one that decodes them one at a time, and
  // choice 1 equals a request of its own with seed + 1.
  ChildProcess wide({"api", test::kDemo, "--port", "0", "--threads", "1"});
  ChildProcess narrow({"api", test::kDemo, "--port", "0", "--threads", "1", "--parallel", "1"});
  const json three{{"prompt", "And God said"}, {"max_tokens", 12}, {"temperature", 1.0}, {"seed", 5}, {"n", 3}};
  auto a = post(wide.url(), "/v1/completions", three, nullptr), b = post(narrow.url(), "/v1/completions", three, nullptr);
  ASSERT_TRUE(a && b && a->status == 200 && b->status == 200) << (a ? a->body : "");
  const json choices = json::parse(a->body)["choices"];
  ASSERT_EQ(choices.size(), 3u);
  EXPECT_EQ(choices, json::parse(b->body)["choices"]) << "the same whatever --parallel";
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(choices[i]["index"], i);
  EXPECT_NE(choices[0]["text"], choices[1]["text"]) << "each choice its own seed";
  json single = three;
  single["n"] = 1;
  single["seed"] = 6;
  auto one = post(narrow.url(), "/v1/completions", single, nullptr);
  ASSERT_TRUE(one && one->status == 200);
  EXPECT_EQ(json::parse(one->body)["choices"][0]["text"], choices[1]["text"]);
  // Streamed, the choices come in turn, each chunk with its index.
  json streamed = three;
  streamed["stream"] = true;
  auto s = post(wide.url(), "/v1/completions", streamed, nullptr);
  ASSERT_TRUE(s && s->status == 200);
  std::vector<std::string> texts(3);
  std::istringstream lines(s->body);
  for (std::string line; std::getline(lines, line);) {
    if (!line.starts_with("data: {")) continue;
    const json c = json::parse(line.substr(6))["choices"][0];
    texts[c["index"].get<size_t>()] += c["text"].get<std::string>();
  }
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(texts[i], choices[i]["text"]) << i;
}

TEST(ApiServer, PlainHttpFormsErrorsAndTheKey) {
  ChildProcess api({"api", test::kDemo, "--port", "0", "--api-key", kKey, "--threads", "1"});
  // Token ids as the prompt, greedy, equal to larql run; usage counted.
  const std::vector<int> ids{1, 400, 401, 402};
  auto res = post(api.url(), "/v1/completions", {{"prompt", ids}, {"max_tokens", 12}, {"temperature", 0}});
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  const json body = json::parse(res->body);
  const json expected = larql_run("--prompt-ids " + ids_arg(ids) + " --steps 12");
  EXPECT_EQ(body["choices"][0]["text"], expected["text"]);
  EXPECT_EQ(body["object"], "text_completion");
  EXPECT_EQ(body["usage"]["prompt_tokens"], ids.size());

  // A stop string cuts the text before it, across token boundaries, and is not emitted.
  const std::string full = expected["text"];
  const std::string stop = full.substr(full.size() / 2, 4);
  res = post(api.url(), "/v1/completions", {{"prompt", ids}, {"max_tokens", 12}, {"temperature", 0}, {"stop", stop}});
  ASSERT_TRUE(res && res->status == 200);
  EXPECT_EQ(json::parse(res->body)["choices"][0]["text"], full.substr(0, full.find(stop)));
  EXPECT_EQ(json::parse(res->body)["choices"][0]["finish_reason"], "stop");

  // Errors: OpenAI's shape and status, the HTTP layer's own included.
  auto expect_error = [](const httplib::Result& r, int status, const std::string& param_or_code) {
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, status) << r->body;
    const json e = json::parse(r->body, nullptr, false);
    ASSERT_TRUE(e.contains("error") && e["error"].is_object()) << r->body;
    for (const char* key : {"message", "type", "param", "code"}) EXPECT_TRUE(e["error"].contains(key)) << key;
    EXPECT_TRUE(e["error"]["param"] == param_or_code || e["error"]["code"] == param_or_code) << r->body;
  };
  httplib::Client c(api.url());
  c.set_bearer_token_auth(kKey);
  expect_error(c.Post("/v1/completions", "{bad json", "application/json"), 400, "invalid_json");
  expect_error(post(api.url(), "/v1/completions", {{"prompt", "x"}, {"n", 17}}), 400, "n");
  expect_error(post(api.url(), "/v1/completions", {{"prompt", "x"}, {"max_tokens", "many"}}), 400, "max_tokens");
  expect_error(post(api.url(), "/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "hi"}}}}}), 400,
               "no_chat_template");
  expect_error(post(api.url(), "/v1/completions", {{"prompt", std::vector<int>{1, 999999}}}), 400, "prompt");
  expect_error(post(api.url(), "/v1/completions", {{"prompt", std::vector<int>(600, 5)}}), 400, "context_length_exceeded");
  expect_error(post(api.url(), "/v1/completions", {{"prompt", "x"}}, nullptr), 401, "unauthorized");
  expect_error(c.Get("/v1/nothing"), 404, "not_found");
  // A body beyond the default --max-body-mb (8) is refused before it is parsed.
  const std::string huge = R"({"prompt": ")" + std::string((8u << 20) + 1, 'a') + R"("})";
  expect_error(c.Post("/v1/completions", huge, "application/json"), 413, "body_too_large");
  // /health is open, everything else needs the key.
  httplib::Client open(api.url());
  auto health = open.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  EXPECT_EQ(open.Get("/metrics")->status, 401);
  const auto metrics = c.Get("/metrics");
  ASSERT_TRUE(metrics && metrics->status == 200);
  EXPECT_GE(test::metric_sum(metrics->body, "larql_api_completion_tokens_total"), 12.0);
  EXPECT_GE(test::metric_sum(metrics->body, "larql_api_requests_total"), 8.0);
  EXPECT_EQ(test::metric_sum(metrics->body, "larql_api_time_to_first_token_seconds_count"), 2.0);
  // Histograms: every observation in the +Inf bucket; a gap per token after each first.
  const double gaps = test::metric_sum(metrics->body, "larql_api_time_per_output_token_seconds_count");
  EXPECT_EQ(gaps, test::metric_sum(metrics->body, "larql_api_completion_tokens_total") - 2.0);
  const std::string inf = "larql_api_time_per_output_token_seconds_bucket{le=\"+Inf\"} ";
  EXPECT_NE(metrics->body.find(inf + std::to_string(size_t(gaps)) + "\n"), std::string::npos) << metrics->body;
  EXPECT_NE(metrics->body.find("# TYPE larql_api_time_to_first_token_seconds histogram"), std::string::npos);
}

TEST(ApiServer, TokenizeAndDetokenizeInLlamaServersShapes) {
  ChildProcess api({"api", test::kDemo, "--port", "0", "--api-key", kKey, "--threads", "1"});
  auto tok = HfTokenizer::load(test::kDemo + "/tokenizer.json");
  ASSERT_TRUE(tok.ok());
  const std::string text = "In the beginning God created";
  std::vector<int> ids = (*tok)->encode(text);  // BOS first, as the demo tokenizer adds it
  auto res = post(api.url(), "/tokenize", {{"content", text}, {"add_special", true}});
  ASSERT_TRUE(res && res->status == 200) << (res ? res->body : "");
  EXPECT_EQ(json::parse(res->body)["tokens"], ids);
  res = post(api.url(), "/tokenize", {{"content", text}, {"with_pieces", true}});
  ASSERT_TRUE(res && res->status == 200);
  const json pieces = json::parse(res->body)["tokens"];
  ASSERT_EQ(pieces.size(), ids.size() - 1) << "without add_special: no BOS";
  EXPECT_EQ(pieces[0]["id"], ids[1]);
  EXPECT_EQ(pieces[1]["piece"], " the");
  res = post(api.url(), "/detokenize", {{"tokens", std::vector<int>(ids.begin() + 1, ids.end())}});
  ASSERT_TRUE(res && res->status == 200);
  EXPECT_EQ(json::parse(res->body)["content"], text);
  res = post(api.url(), "/detokenize", {{"tokens", {1, 99999}}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  EXPECT_EQ(json::parse(res->body)["error"]["param"], "tokens");
  res = post(api.url(), "/tokenize", {{"text", text}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  EXPECT_EQ(post(api.url(), "/tokenize", {{"content", text}}, nullptr)->status, 401) << "behind the key";
}

TEST(ApiServer, AShardThatIsGoneIsA502InOpenAiShapeWholeOrStreamed) {
  std::optional<ChildProcess> shard;
  shard.emplace(std::vector<std::string>{"serve", test::kDemo, "--port", "0", "--threads", "1"});
  ChildProcess api({"api", test::kDemo, "--port", "0", "--ffn", shard->url(), "--timeout-ms", "2000", "--threads", "1"});
  const json request{{"prompt", std::vector<int>{1, 400}}, {"max_tokens", 2}, {"temperature", 0}};
  auto res = post(api.url(), "/v1/completions", request, nullptr);
  ASSERT_TRUE(res && res->status == 200);
  shard.reset();  // stopped: nothing listens there any more
  res = post(api.url(), "/v1/completions", request, nullptr);
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 502) << res->body;
  EXPECT_EQ(json::parse(res->body)["error"]["code"], "shard_unavailable") << res->body;
  // Streamed: the headers are out before the engine runs, so the error comes as an event.
  json streamed = request;
  streamed["stream"] = true;
  res = post(api.url(), "/v1/completions", streamed, nullptr);
  ASSERT_TRUE(res && res->status == 200);
  EXPECT_NE(res->body.find("\"code\":\"shard_unavailable\""), std::string::npos) << res->body;
  EXPECT_EQ(res->body.find("[DONE]"), std::string::npos) << "an error is not a normal end";
}

TEST(ApiServer, GenerationEndsAtTheModelsEndTokenWithFinishReasonStop) {
  // The Gemma 3 fixture, its generation_config naming the 4th greedy token as an end token.
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("larql_api_eos_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  for (const auto& f : fs::directory_iterator(test::gemma_fixture("gemma3"))) fs::copy_file(f.path(), dir / f.path().filename());
  const test::ReferenceOutput ref = test::gemma_reference("gemma3");
  std::ofstream(dir / "generation_config.json") << json{{"eos_token_id", {1, ref.greedy[3]}}}.dump();
  {
    ChildProcess api({"api", dir.string(), "--port", "0", "--threads", "1"});
    auto res = post(api.url(), "/v1/completions", {{"prompt", ref.tokens}, {"max_tokens", 8}, {"temperature", 0}}, nullptr);
    ASSERT_TRUE(res && res->status == 200) << (res ? res->body : "no answer");
    const json body = json::parse(res->body);
    EXPECT_EQ(body["choices"][0]["finish_reason"], "stop");
    EXPECT_EQ(body["usage"]["completion_tokens"], 3) << "the end token itself is not part of the completion";
    res = post(api.url(), "/v1/completions", {{"prompt", ref.tokens}, {"max_tokens", 2}, {"temperature", 0}}, nullptr);
    ASSERT_TRUE(res && res->status == 200);
    EXPECT_EQ(json::parse(res->body)["choices"][0]["finish_reason"], "length");
  }
  fs::remove_all(dir);
}

// Structured output through the Node client: 100 chat completions at temperature 1 under a
// JSON schema (a free string, an integer, an enum array, a nested object), each validated by
// ajv, all ending with "stop" (the value closes within max_tokens, forced when the budget
// runs low); streamed and json_object answers too; a schema keyword larql cannot follow is
// a 400 naming it.
// Under the sanitizers 20 of them: the same paths, where 100 took 100-200 s (a tenth of the
// sanitized build's tests, and the longest of its longest binary).
#if defined(__SANITIZE_ADDRESS__)
constexpr int kStructuredRounds = 2;
#else
constexpr int kStructuredRounds = 10;
#endif
TEST(ApiServer, JsonSchemaAnswersAlwaysValidateThroughTheNodeClient) {
  ASSERT_TRUE(std::filesystem::exists(test::js_cache() / "node_modules/ajv"))
      << "the ajv npm package is missing: scripts/install-js-tokenizers.sh installs it (make test runs it)";
  ChildProcess api({"api", test::kDemo, "--port", "0", "--chat-template", "chatml", "--api-key", kKey, "--threads", "2"});
  const auto r = test::run_command("NODE_PATH='" + (test::js_cache() / "node_modules").string() + "' node '" LARQL_SOURCE_DIR
                                   "/tests/api/openai_structured.js' '" + api.url() + "/v1' '" + kKey + "' " +
                                   std::to_string(kStructuredRounds) + " 10");
  ASSERT_EQ(r.status, 0) << r.output;
  const json got = json::parse(r.output);
  EXPECT_EQ(got["completions"], 10 * kStructuredRounds);
  EXPECT_TRUE(got["invalid"].empty()) << got["invalid"].dump(1);
  EXPECT_EQ(got["finish_reasons"], json({{"stop", 10 * kStructuredRounds}}));
  EXPECT_TRUE(got["streamed_valid"].get<bool>()) << got["streamed"];
  EXPECT_TRUE(got["object_valid"].get<bool>());
  EXPECT_EQ(got["refusal"]["status"], 400);
  EXPECT_EQ(got["refusal"]["param"], "response_format");
  EXPECT_NE(got["refusal"]["message"].get<std::string>().find("'pattern'"), std::string::npos) << got["refusal"];
  std::printf("structured output, streamed: %s\n", got["streamed"].get<std::string>().c_str());
}

// openai_tools.js against `larql api` on `model` in chat `format`: the named and the
// required call are valid calls whose arguments validate, read back from the format's own
// text; tool_choice none answers without calls. Its whole report, for more checks.
json expect_tool_calls_through_the_node_client(const std::string& model, const std::string& format) {
  ChildProcess api({"api", model, "--port", "0", "--chat-template", format, "--api-key", kKey, "--threads", "2"});
  const auto r = test::run_command("NODE_PATH='" + (test::js_cache() / "node_modules").string() + "' node '" LARQL_SOURCE_DIR
                                   "/tests/api/openai_tools.js' '" + api.url() + "/v1' '" + kKey + "'");
  EXPECT_EQ(r.status, 0) << r.output;
  if (r.status != 0) return json::object();
  const json got = json::parse(r.output);
  EXPECT_EQ(got["named"]["finish"], "tool_calls") << got.dump();
  EXPECT_EQ(got["named"]["calls"].size(), 1u) << got.dump();
  EXPECT_EQ(got["streamed"]["finish"], "tool_calls") << got.dump();
  EXPECT_EQ(got["streamed"]["calls"].size(), 1u) << got.dump();
  EXPECT_TRUE(got["arguments_valid"].get<bool>()) << got.dump();
  EXPECT_FALSE(got["none"]["has_calls"].get<bool>());
  if (!got["named"]["calls"].empty()) std::printf("%s tool call (named): %s\n", format.c_str(), got["named"]["calls"][0].dump().c_str());
  return got;
}

// Tool calls through the Node client (chatml, the Hermes-style calls Qwen writes): with
// tool_choice named or required the whole call is constrained, so the demo model's calls
// name the function and their arguments validate against its parameters (ajv), whole and
// streamed; the call goes back with the tool's result and is answered; tool_choice none
// answers in text.
// A required tool call or a JSON-schema answer needs as many tokens as its shortest form
// takes in this vocabulary, not one per byte: with max_tokens below its bytes but above its
// tokens the answer is complete and valid; below its tokens the request is a 400 naming
// max_tokens, never an empty "stop".
TEST(ApiServer, ConstrainedAnswersFitTheirTokensNotTheirBytes) {
  ChildProcess api({"api", test::kDemo, "--port", "0", "--chat-template", "chatml", "--api-key", kKey, "--threads", "1"});
  const json tool = {{"type", "function"},
                     {"function", {{"name", "weather"},
                                   {"parameters", {{"type", "object"}, {"properties", {{"city", {{"type", "string"}}}}},
                                                   {"required", {"city"}}, {"additionalProperties", false}}}}}};
  auto call = [&](size_t max_tokens) {
    return post(api.url(), "/v1/chat/completions",
                {{"messages", {{{"role", "user"}, {"content", "What is the weather in Paris?"}}}},
                 {"tools", {tool}},
                 {"tool_choice", {{"type", "function"}, {"function", {{"name", "weather"}}}}},
                 {"max_tokens", max_tokens},
                 {"temperature", 0}});
  };
  auto r = call(60);  // the call's shortest form is about 70 bytes
  ASSERT_TRUE(r && r->status == 200) << (r ? r->body : "");
  const json message = json::parse(r->body)["choices"][0]["message"];
  ASSERT_TRUE(message.contains("tool_calls")) << message;
  EXPECT_EQ(message["tool_calls"][0]["function"]["name"], "weather");
  const json arguments = json::parse(message["tool_calls"][0]["function"]["arguments"].get<std::string>(), nullptr, false);
  ASSERT_TRUE(arguments.is_object()) << message;
  EXPECT_TRUE(arguments["city"].is_string());
  EXPECT_EQ(arguments.size(), 1u);
  auto small = call(8);
  ASSERT_TRUE(small);
  EXPECT_EQ(small->status, 400) << small->body;
  const json error = json::parse(small->body)["error"];
  EXPECT_EQ(error["param"], "max_tokens");
  EXPECT_NE(error["message"].get<std::string>().find("max_tokens 8 cannot hold the tool call"), std::string::npos) << error;

  // response_format json_schema: at exactly the tokens the 400 names, a valid answer.
  const json schema = {{"type", "object"},
                       {"properties", {{"title", {{"type", "string"}}}, {"year", {{"type", "integer"}}}}},
                       {"required", {"title", "year"}}};
  auto answer = [&](size_t max_tokens) {
    return post(api.url(), "/v1/chat/completions",
                {{"messages", {{{"role", "user"}, {"content", "Name a book."}}}},
                 {"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "book"}, {"schema", schema}}}}},
                 {"max_tokens", max_tokens},
                 {"temperature", 0}});
  };
  auto refused = answer(2);
  ASSERT_TRUE(refused && refused->status == 400) << (refused ? refused->body : "");
  const std::string why = json::parse(refused->body)["error"]["message"];
  const size_t at = why.find("takes ");
  ASSERT_NE(at, std::string::npos) << why;
  const size_t needed = std::stoul(why.substr(at + 6));
  EXPECT_LT(needed, std::string(R"({"title":"","year":0})").size());
  auto fits = answer(needed);
  ASSERT_TRUE(fits && fits->status == 200) << (fits ? fits->body : "");
  const json book = json::parse(json::parse(fits->body)["choices"][0]["message"]["content"].get<std::string>(), nullptr, false);
  ASSERT_TRUE(book.is_object()) << fits->body;
  EXPECT_TRUE(book["title"].is_string());
  EXPECT_TRUE(book["year"].is_number_integer());
}

TEST(ApiServer, ToolCallsRoundTripThroughTheNodeClient) {
  const json got = expect_tool_calls_through_the_node_client(test::kDemo, "chatml");
  ASSERT_FALSE(got.empty());
  EXPECT_TRUE(got["named"]["content"].is_null()) << "a call without text has null content";
  EXPECT_TRUE(got["round_trip"]["content"].is_string()) << got.dump();
  EXPECT_EQ(got["round_trip"]["finish"], "length");
}

// A random model of `family` whose vocabulary holds a chat format's marks as special tokens,
// as the real ones do (ids 256 on, in place of synth's unused tokens): no text of their
// own, so a grammar of calls spells them by their vocabulary strings.
std::filesystem::path model_with_marks(const std::string& family, const std::vector<std::string>& marks) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("larql_api_marks_" + family + "_" + std::to_string(::getpid()));
  const auto synth = test::run_command(std::string(LARQL_BINARY) + " synth --family " + family + " --out '" + dir.string() +
                                       "' --hidden 64 --heads 4 --kv-heads 2 --head-dim 16 --vocab 300 --layers 2 --ffn 64 "
                                       "--experts 4 --experts-used 2 --context 1024 --dtype f32 --seed 5");
  EXPECT_EQ(synth.status, 0) << synth.output;
  json tokenizer = json::parse(std::ifstream(dir / "tokenizer.json"));
  for (size_t i = 0; i < marks.size(); ++i) {
    const int id = int(256 + i);
    tokenizer["model"]["vocab"].erase("<|synth_" + std::to_string(id) + "|>");
    tokenizer["model"]["vocab"][marks[i]] = id;
    tokenizer["added_tokens"].push_back({{"id", id}, {"content", marks[i]}, {"single_word", false}, {"lstrip", false},
                                         {"rstrip", false}, {"normalized", false}, {"special", true}});
  }
  std::ofstream(dir / "tokenizer.json") << tokenizer.dump();
  return dir;
}

// Gemma 4: <|tool_call>call:NAME{key:<|"|>value<|"|>}<tool_call|>, its own syntax.
TEST(ApiServer, Gemma4ToolCallsSpellItsSpecialMarks) {
  const auto dir = model_with_marks("gemma4", {"<|turn>", "<turn|>", "<|tool_call>", "<tool_call|>", "<|\"|>", "<|tool_response>",
                                               "<tool_response|>", "<|tool>", "<tool|>", "<|channel>", "<channel|>"});
  expect_tool_calls_through_the_node_client(dir.string(), "gemma4");
  std::filesystem::remove_all(dir);
}

// GPT-OSS's harmony: a commentary message to functions.NAME, its arguments JSON, ended by <|call|>.
TEST(ApiServer, HarmonyToolCallsAreCommentaryToFunctions) {
  const auto dir = model_with_marks("gpt-oss", {"<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|constrain|>", "<|return|>", "<|call|>"});
  expect_tool_calls_through_the_node_client(dir.string(), "harmony");
  std::filesystem::remove_all(dir);
}

TEST(ApiServer, TheQueueIsBoundedAndClientsThatLeaveGiveTheirPlaceUp) {
  ChildProcess shard({"serve", test::kDemo, "--port", "0", "--threads", "1"});
  test::GatedProxy gate(shard.url());  // holds every FFN call until opened
  ChildProcess api({"api", test::kDemo, "--port", "0", "--ffn", gate.url(), "--wire", "f32", "--max-queue", "1", "--parallel", "1", "--threads", "1"});
  const json request{{"prompt", std::vector<int>{1, 400}}, {"max_tokens", 3}, {"temperature", 0}};
  auto waiting = [&] { return test::server_metric(api.url(), "larql_api_queue_waiting"); };

  // A streams and is held in the engine by the gate; B waits in the queue; C is one too many.
  test::RawConnection a(api.port());
  json streamed = request;
  streamed["stream"] = true;
  streamed["max_tokens"] = 200;
  ASSERT_TRUE(a.send(raw_post("/v1/completions", streamed)));
  ASSERT_TRUE(gate.wait_for_waiting(1));
  test::RawConnection b(api.port());
  ASSERT_TRUE(b.send(raw_post("/v1/completions", request)));
  ASSERT_TRUE(test::eventually([&] { return waiting() == 1; }));
  auto c = post(api.url(), "/v1/completions", request, nullptr);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->status, 429) << c->body;
  EXPECT_EQ(c->get_header_value("Retry-After"), "1");
  EXPECT_EQ(json::parse(c->body)["error"]["code"], "queue_full");

  // B leaves while waiting: its place is free at once, so D is queued, not refused.
  b.close();
  ASSERT_TRUE(test::eventually([&] { return waiting() == 0; }));
  int d_status = 0;
  std::string d_body;
  std::thread d_thread([&] {
    auto d = post(api.url(), "/v1/completions", request, nullptr);
    d_status = d ? d->status : -1;
    d_body = d ? d->body : "(no answer)";
  });
  ASSERT_TRUE(test::eventually([&] { return waiting() == 1; }));

  // A leaves mid-stream: its generation stops at its next token, and D runs.
  a.close();
  gate.open();
  d_thread.join();
  EXPECT_EQ(d_status, 200) << d_body;
  const double tokens = test::server_metric(api.url(), "larql_api_completion_tokens_total");
  EXPECT_LT(tokens, 200.0) << "A stopped generating when its client left (" << tokens << " tokens in all)";
  EXPECT_EQ(waiting(), 0.0);
}

// Continuous batching: 8 concurrent greedy requests with different prompts and lengths,
// plus one streamed request whose client leaves mid-way, each equal to its single run.
// Through a router and two shards the engine is held at its first step (a gate in front
// of the router) until every request has arrived, so the rest join mid-way; then every
// step sends one walk-ffn request per layer for all the sequences together. Speculative:
// with --draft (lookup, or a draft model) each sequence brings its drafts to the same
// steps, and each request's text is still its single (plain) run's.
void expect_batched_requests_equal_single_runs(bool remote, const std::vector<std::string>& draft = {}) {
  const bool speculative = !draft.empty();
  std::optional<ChildProcess> low, high, router;
  std::optional<test::GatedProxy> gate;
  std::vector<std::string> args{"api", test::kDemo, "--port", "0", "--parallel", "8", "--threads", "1"};
  if (remote) {
    low.emplace(std::vector<std::string>{"serve", test::kDemo, "--port", "0", "--layers", "0-2", "--threads", "1"});
    high.emplace(std::vector<std::string>{"serve", test::kDemo, "--port", "0", "--layers", "3-5", "--threads", "1"});
    router.emplace(std::vector<std::string>{"router", "--port", "0", "--shards", "0-2=" + low->url() + ",3-5=" + high->url()});
    gate.emplace(router->url());
    args.insert(args.end(), {"--ffn", gate->url(), "--wire", "f32"});
  }
  if (speculative) args.push_back("--draft"), args.insert(args.end(), draft.begin(), draft.end());
  ChildProcess api(args);
  std::vector<std::vector<int>> prompts;
  std::vector<size_t> lengths;
  for (int i = 0; i < 8; ++i) {
    std::vector<int> p{1};
    for (int k = 0; k <= i; ++k) p.push_back(300 + 7 * i + k);  // 2 to 9 tokens
    prompts.push_back(p);
    lengths.push_back(6 + 3 * size_t(i));  // 6 to 27 tokens
  }
  std::vector<std::string> texts(8);
  std::vector<int> statuses(8, 0);
  std::vector<std::thread> clients;
  for (size_t i = 0; i < 8; ++i)
    clients.emplace_back([&, i] {
      auto r = post(api.url(), "/v1/completions", {{"prompt", prompts[i]}, {"max_tokens", lengths[i]}, {"temperature", 0}}, nullptr);
      statuses[i] = r ? r->status : -1;
      texts[i] = r && r->status == 200 ? json::parse(r->body)["choices"][0]["text"].get<std::string>() : (r ? r->body : "");
    });
  // A ninth request, streamed, whose client leaves after its first chunk.
  test::RawConnection leaver(api.port());
  ASSERT_TRUE(leaver.send(raw_post("/v1/completions", {{"prompt", std::vector<int>{1, 500, 501}}, {"max_tokens", 200},
                                                        {"temperature", 0}, {"stream", true}})));
  auto in_engine = [&] {
    return test::server_metric(api.url(), "larql_api_queue_waiting") + test::server_metric(api.url(), "larql_api_running");
  };
  if (remote) {
    ASSERT_TRUE(test::eventually([&] { return in_engine() == 9; })) << "every request arrived while the first step was held";
    gate->open();
  }
  ASSERT_TRUE(test::eventually([&] { return leaver.readable(); }));
  // The leaver asked for 200 tokens: its sequence holds a cache until the engine drops it.
  EXPECT_TRUE(test::eventually([&] { return test::server_metric(api.url(), "larql_api_kv_cache_bytes") > 0; }));
  leaver.close();
  for (auto& t : clients) t.join();

  size_t generated = 0;
  for (size_t i = 0; i < 8; ++i) {
    ASSERT_EQ(statuses[i], 200) << texts[i];
    const json single = larql_run("--prompt-ids " + ids_arg(prompts[i]) + " --steps " + std::to_string(lengths[i]));
    EXPECT_EQ(texts[i], single["text"]) << "request " << i << " differs from its single run";
    generated += single["generated_ids"].size();
  }
  ASSERT_TRUE(test::eventually([&] { return in_engine() == 0; })) << "the leaver was dropped";
  EXPECT_TRUE(test::eventually([&] { return test::server_metric(api.url(), "larql_api_kv_cache_bytes") == 0; }))
      << "no sequence left, no cache held";
  const double steps = test::server_metric(api.url(), "larql_api_engine_steps_total");
  const double completion = test::server_metric(api.url(), "larql_api_completion_tokens_total");
  EXPECT_LT(completion, double(generated) + 200) << "the leaver stopped generating";
  std::printf("%s%s: %zu tokens for the 8 requests in %.0f engine steps\n", remote ? "through the grid" : "local",
              speculative ? ", speculative" : "", generated, steps);
  if (speculative) {
    const double drafted = test::server_metric(api.url(), "larql_api_draft_tokens_total");
    const double kept = test::server_metric(api.url(), "larql_api_draft_tokens_accepted_total");
    std::printf("drafts kept: %.0f of %.0f\n", kept, drafted);
    EXPECT_GT(kept, 0.0) << "the demo model repeats itself and its draft model knows it: some drafts should be kept";
  }
  if (remote) {
    const double walks = test::server_metric(low->url(), "larql_shard_requests_total") +
                         test::server_metric(high->url(), "larql_shard_requests_total");
    EXPECT_EQ(walks, 6 * steps) << "one walk-ffn request per layer per step, whatever the number of sequences";
    EXPECT_LT(steps, double(generated) / 2) << "the sequences ran together";
  }
}

TEST(ApiBatching, EightConcurrentRequestsEachEqualTheirSingleRunLocally) { expect_batched_requests_equal_single_runs(false); }

TEST(ApiBatching, EightConcurrentRequestsThroughTwoShardsAndARouterOneWalkPerLayerPerStep) {
  expect_batched_requests_equal_single_runs(true);
}

// Each sequence's drafts a tree of lookup's continuations (a chain where it finds one).
TEST(ApiBatching, SpeculativeSequencesThroughTwoShardsEachEqualTheirPlainSingleRun) {
  expect_batched_requests_equal_single_runs(true, {"lookup", "--draft-max", "16", "--draft-branches", "4"});
}

TEST(ApiBatching, SequencesDraftedByADraftModelEachEqualTheirPlainSingleRun) {
  expect_batched_requests_equal_single_runs(false, {std::string(LARQL_SOURCE_DIR) + "/models/demo-draft"});
}

// A long prompt with no sequence decoding beside it is read in one step (a round trip per
// layer through shards); while another sequence decodes, in pieces of --prefill-chunk, so
// that the other's tokens keep coming. Either way its answer is its single run's.
TEST(ApiBatching, ALongPromptAloneTakesOneStepAndBesideADecodingSequenceItsPieces) {
  ChildProcess api({"api", test::kDemo, "--port", "0", "--parallel", "2", "--threads", "1", "--prefill-chunk", "64"});
  std::vector<int> prompt{1};
  for (int k = 0; k < 299; ++k) prompt.push_back(200 + (k * 37) % 3000);
  const json single = larql_run("--prompt-ids " + ids_arg(prompt) + " --steps 1");
  // (The engine counts a step once it has returned; its answers may arrive before.)
  auto steps = [&] { return test::server_metric(api.url(), "larql_api_engine_steps_total"); };
  auto complete = [&] {
    auto r = post(api.url(), "/v1/completions", {{"prompt", prompt}, {"max_tokens", 1}, {"temperature", 0}}, nullptr);
    EXPECT_TRUE(r && r->status == 200) << (r ? r->body : "no answer");
    return r && r->status == 200 ? json::parse(r->body)["choices"][0]["text"].get<std::string>() : "";
  };
  const double before = steps();
  EXPECT_EQ(complete(), single["text"]);
  EXPECT_TRUE(test::eventually([&] { return steps() - before == 1.0; })) << "300 prompt tokens alone: one step, not "
                                                                         << steps() - before;
  // Scored (echo with logprobs), each prompt row brings the vocabulary's logits: pieces of 64 even alone.
  const double scoring = steps();
  auto scored = post(api.url(), "/v1/completions",
                     {{"prompt", prompt}, {"max_tokens", 0}, {"echo", true}, {"logprobs", 1}, {"temperature", 0}}, nullptr);
  ASSERT_TRUE(scored && scored->status == 200) << (scored ? scored->body : "no answer");
  EXPECT_EQ(json::parse(scored->body)["choices"][0]["logprobs"]["token_logprobs"].size(), prompt.size());
  EXPECT_TRUE(test::eventually([&] { return steps() - scoring == 5.0; })) << "300 scored prompt tokens: pieces of 64, not "
                                                                           << steps() - scoring;

  test::RawConnection decoding(api.port());
  ASSERT_TRUE(decoding.send(raw_post("/v1/completions", {{"prompt", std::vector<int>{1, 500, 501}}, {"max_tokens", 200},
                                                         {"temperature", 0}, {"stream", true}})));
  ASSERT_TRUE(test::eventually([&] { return decoding.readable(); })) << "the other sequence decodes";
  const double beside = steps();
  EXPECT_EQ(complete(), single["text"]);
  EXPECT_TRUE(test::eventually([&] { return steps() - beside >= 5.0; })) << "300 prompt tokens beside a decoding sequence: pieces of 64";
  decoding.close();
}

}  // namespace
}  // namespace larql
