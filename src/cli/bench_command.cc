#include "cli/arithmetic_option.h"
#include "cli/bench_command.h"
#include "cli/command_model.h"
#include "cli/draft_option.h"

#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "eval/wire_bench.h"
#include "eval/wire_report.h"
#include "infer/model_draft.h"
#include "model/loader.h"

namespace larql::cli {
namespace {

struct Options {
  std::string model, ffn, wire = "f32,f16,q8,i8";
  std::optional<std::string> tokenizer, prompt, prompts_file, out, plot, api_key, ca_cert, links, remote_layers;
  std::vector<int> prompt_ids;
  size_t steps = 50, threads = 0;
  std::optional<size_t> assert_topk;
  bool local = false, json = false, expert_rows = false;
  std::optional<std::string> arithmetic;
  std::optional<std::string> draft;  // --draft
  DraftShape draft_shape;            // --draft-max, --draft-branches
};

int run_bench(const Options& o) {
  auto fail = [](const std::string& m) {
    std::cerr << "larql bench: " << m << "\n";
    return 2;
  };
  auto model = load_command_model("larql bench", o.model, o.arithmetic);
  if (!model) return fail(model.error().message);
  WireBenchOptions w;
  w.steps = o.steps;
  w.k = o.assert_topk.value_or(5);
  w.local_reference = o.local;
  w.ffn_spec = o.remote_layers.value_or(o.ffn);
  w.sessions = o.remote_layers.has_value();
  w.api_key = o.api_key;
  w.ca_cert = o.ca_cert;
  w.expert_rows = o.expert_rows;
  w.threads = o.threads ? o.threads : std::max(1u, std::thread::hardware_concurrency());
  if (o.links) {
    auto links = parse_links(*o.links);
    if (!links) return fail("--links: " + links.error().message);
    w.links = *links;
  }
  w.formats.clear();
  std::stringstream names(o.wire);
  for (std::string name; std::getline(names, name, ',');) {
    auto e = wire::encoding_from_name(name);
    if (!e) return fail("--wire '" + name + "' is not one of " + wire::encoding_names());
    w.formats.push_back(*e);
  }
  std::vector<std::string> texts;
  if (o.prompt) texts.push_back(*o.prompt);
  if (o.prompts_file) {
    std::ifstream in(*o.prompts_file);
    if (!in) return fail("cannot read --prompts " + *o.prompts_file);
    for (std::string line; std::getline(in, line);)
      if (!line.empty()) texts.push_back(line);
  }
  if (!texts.empty()) {
    auto tok = load_tokenizer_for(*model, o.model, o.tokenizer);
    if (!tok) return fail(tok.error().message);
    if (!*tok) return fail("--prompt/--prompts need a tokenizer (--tokenizer FILE); or pass --prompt-ids");
    for (const auto& t : texts) w.prompts.push_back((*tok)->encode(t));
  }
  if (!o.prompt_ids.empty()) w.prompts.push_back(o.prompt_ids);
  if (w.prompts.empty()) w.prompts.push_back({model->config.bos_id >= 0 ? model->config.bos_id : 1});
  for (const auto& p : w.prompts)
    for (int id : p)
      if (id < 0 || size_t(id) >= model->config.vocab) return fail("prompt id " + std::to_string(id) + " is outside the vocabulary");

  // --draft: a draft model runs here, as with larql run.
  std::optional<Model> draft_model;
  std::unique_ptr<ModelDraft> draft;
  ThreadPool draft_pool(w.threads);
  if (o.draft) {
    auto choice = parse_draft_option(*o.draft, o.draft_shape);
    if (!choice) return fail(choice.error().message);
    w.speculative = choice->options;
    w.draft_name = *o.draft;
    if (choice->model) {
      auto loaded = load_command_model("larql bench --draft", *choice->model, o.arithmetic);
      if (!loaded) return fail("--draft: " + loaded.error().message);
      draft_model = std::move(*loaded);
      auto created = ModelDraft::create(*draft_model, model->config, draft_pool);
      if (!created) return fail(created.error().message);
      draft = std::move(*created);
      w.speculative->draft = [&draft](std::span<const int> context, size_t k) { return draft->propose(context, k); };
    }
  }
  if (w.sessions && w.speculative && w.speculative->branches > 1)
    return fail("--draft-branches " + std::to_string(w.speculative->branches) +
                ": over --remote-layers a pass verifies one chain of drafts (PROTOCOL §13 v1.2 has no draft trees)");
  auto report = run_wire_bench(*model, w);
  if (!report) return fail(report.error().message);
  const auto doc = report_json(*report);
  if (o.json) std::cout << doc.dump(2) << "\n";
  else std::cout << report_table(*report);
  if (o.out) std::ofstream(*o.out) << doc.dump(2) << "\n";
  if (o.plot) std::ofstream(*o.plot) << report_svg(*report);

  int status = 0;
  if (!report->remote_f32_exact && o.local) {
    std::cerr << "larql bench: remote f32 logits differ from the local run: the wire is not exact\n";
    status = 1;
  }
  if (o.assert_topk)
    for (const auto& f : report->formats)
      if (f.wire != wire::Encoding::f32 && f.topk_agreement < 1.0) {
        std::cerr << "larql bench: " << wire::encoding_name(f.wire) << " top-" << *o.assert_topk
                  << " differs from the reference at " << (1.0 - f.topk_agreement) * double(f.topk_per_step.size())
                  << " of " << f.topk_per_step.size() << " steps\n";
        status = 1;
      }
  return status;
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("bench", "Accuracy, bytes and time of each wire format against f32 (ADR-0009's gate)");
  cmd->add_option("model", o->model, "the model (the client side: attention, norms)")->required();
  auto* ffn = cmd->add_option("--ffn", o->ffn, "router or shard URL, or a layer map (as larql run --ffn)");
  auto* layers = cmd->add_option("--remote-layers", o->remote_layers,
                                 "instead of --ffn: whole layers on session shards, \"0-2=URL|URL,3-5=URL\" (as larql run "
                                 "--remote-layers); a token costs a round trip per range");
  ffn->excludes(layers);
  layers->excludes(ffn);
  cmd->add_option("--steps", o->steps, "tokens per prompt")->capture_default_str();
  cmd->add_option("--wire", o->wire, "formats to compare, comma-separated")->capture_default_str();
  cmd->add_option("--assert-topk-match", o->assert_topk, "exit 1 if any step of a non-f32 format has another top-K set");
  cmd->add_option("--tokenizer", o->tokenizer, "tokenizer for --prompt/--prompts");
  cmd->add_option("--prompt", o->prompt, "prompt text");
  cmd->add_option("--prompt-ids", o->prompt_ids, "prompt ids")->delimiter(',');
  cmd->add_option("--prompts", o->prompts_file, "file with one prompt per line");
  cmd->add_flag("--local", o->local, "reference = the local FFN; remote f32 must then equal it bit for bit");
  cmd->add_flag("--json", o->json, "print one JSON document");
  cmd->add_option("--out", o->out, "also write the JSON document to this file");
  cmd->add_option("--plot", o->plot, "write an SVG chart (KL per step, bytes per token)");
  cmd->add_option("--api-key", o->api_key, "bearer key for the shards");
  cmd->add_option("--ca-cert", o->ca_cert, "CA certificate for https:// shards");
  cmd->add_flag("--expert-rows", o->expert_rows, "MoE models: per-expert rows from the expert shards, summed here (as larql run)");
  cmd->add_option("--threads", o->threads, "compute threads");
  add_arithmetic_option(cmd, o->arithmetic);
  cmd->add_option("--links", o->links, "links to project tokens/s for, e.g. 1Gbit/0.2ms,100Mbit/2ms,10Mbit/20ms (the default)");
  cmd->add_option("--draft", o->draft,
                  "also decode speculatively in the last --wire format (lookup[:N] or a draft model's path, as larql run): "
                  "drafts kept, tokens per pass, and tokens/s projected per link");
  add_draft_shape_options(cmd, o->draft_shape);
  cmd->callback([o, ffn, layers] {
    if (ffn->count() == 0 && layers->count() == 0) throw CLI::RequiredError("--ffn or --remote-layers");
    if (int rc = run_bench(*o); rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace larql::cli
