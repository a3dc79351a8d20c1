#include "cli/number_checks.h"
#include "cli/arithmetic_option.h"
#include "cli/command_model.h"
#include "cli/huge_pages_option.h"
#include "cli/perplexity_command.h"

#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "cli/ffn_options.h"
#include "eval/perplexity.h"
#include "model/loader.h"
#include "wire/wire_config.h"

namespace larql::cli {
namespace {

struct Options {
  std::string model;
  std::string file;
  std::optional<std::string> tokenizer;
  PerplexityOptions eval;
  size_t threads = 0;
  bool json = false;
  FfnOptions remote;
  std::optional<std::string> arithmetic;
  bool no_huge_pages = false;
};

int fail(const std::string& message) {
  std::cerr << "larql perplexity: " << message << "\n";
  return 1;
}

int run(const Options& o) {
  auto model = load_command_model("larql perplexity", o.model, o.arithmetic);
  if (!model) return fail(model.error().message);
  if (auto placed = place_weights(*model, o.no_huge_pages, {o.remote.ffn ? WeightsUsed::all_but_ffn : WeightsUsed::all}); !placed)
    return fail(placed.error().message);
  auto tokenizer = load_tokenizer_for(*model, o.model, o.tokenizer);
  if (!tokenizer) return fail(tokenizer.error().message);
  if (!*tokenizer) return fail(o.model + " carries no tokenizer; give one with --tokenizer");
  std::ifstream in(o.file, std::ios::binary);
  if (!in) return fail("cannot read " + o.file);
  std::stringstream text;
  text << in.rdbuf();
  // As llama.cpp does: the whole text tokenised once (BOS first when the model adds one),
  // and that BOS put back at the start of every chunk.
  const std::vector<int> tokens = (*tokenizer)->encode(text.str());
  PerplexityOptions eval = o.eval;
  const int bos = model->config.bos_id;
  if (bos >= 0 && !tokens.empty() && tokens.front() == bos) eval.bos = bos;

  ThreadPool pool(o.threads ? o.threads : std::max(1u, std::thread::hardware_concurrency()));
  RemoteFfn* remote = nullptr;
  auto ffn = make_ffn_backend(*model, pool, o.remote, "larql perplexity", &remote);
  if (!ffn) return fail(ffn.error().message);
  Transformer transformer(*model, **ffn, pool);
  if (!o.json)
    std::cerr << "larql perplexity: " << tokens.size() << " tokens, chunks of " << eval.ctx << ", "
              << (remote ? "FFN over " + wire::describe(remote->request_encodings()) : std::string("local FFN")) << "\n";
  auto result = perplexity(transformer, tokens, eval, [&](const PerplexityEstimate& e) {
    if (!o.json) std::fprintf(stderr, "[%zu]%.4f,%s", e.chunks, e.perplexity, e.chunks % 8 == 0 ? "\n" : " ");
  });
  if (!o.json) std::fprintf(stderr, "\n");
  if (!result) return fail(result.error().message);
  if (o.json) {
    std::cout << nlohmann::json{{"model", model->config.name}, {"perplexity", result->perplexity},
                                {"uncertainty", result->uncertainty}, {"chunks", result->chunks},
                                {"ctx", eval.ctx}, {"tokens_scored", result->tokens_scored},
                                {"wire", remote ? wire::describe(remote->request_encodings()) : std::string("local")}}
                     .dump()
              << "\n";
  } else {
    std::printf("perplexity: %.4f ± %.4f\n", result->perplexity, result->uncertainty);
  }
  return 0;
}

}  // namespace

void add_perplexity_command(CLI::App& app) {
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("perplexity", "Perplexity of a model on a text file (llama.cpp's convention)");
  cmd->add_option("model", o->model, "the model (Hugging Face directory, GGUF or llama2.c file)")->required();
  cmd->add_option("--file", o->file, "the text to score")->required();
  cmd->add_option("--tokenizer", o->tokenizer, "tokenizer file when the model carries none");
  cmd->add_option("--ctx", o->eval.ctx, "tokens per chunk; the second half of each is scored")->capture_default_str();
  cmd->add_option("--chunks", o->eval.chunks, "score at most this many chunks (0: all)")->capture_default_str();
  cmd->add_option("--batch", o->eval.batch, "tokens per forward pass")->capture_default_str()->check(positive());
  cmd->add_option("--threads", o->threads, "compute threads (default: all cores)");
  add_arithmetic_option(cmd, o->arithmetic);
  add_huge_pages_option(cmd, o->no_huge_pages);
  cmd->add_flag("--json", o->json, "print one JSON object");
  add_ffn_options(cmd, o->remote);
  cmd->callback([o] {
    if (int rc = run(*o); rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace larql::cli
