// How far the bf16-dot arithmetic moves a model's predictions from the exact one
// (kernels/bf16_dot.h against matvec.h): the same text teacher-forced through the model
// twice, once per arithmetic, every position's logits compared as `larql bench` compares
// wire formats (top-1, top-K set, KL, max |Δlogit|).
//
//   build/bench/arithmetic_agreement MODEL TEXT_FILE [--window 128] [--max-positions 2048] [--threads 2]
//                                    [--only all|classifier|attention|ffn|gate|up|down]
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "eval/logit_compare.h"
#include "infer/local_ffn.h"
#include "infer/transformer.h"
#include "model/loader.h"

namespace {

using namespace larql;

// --only: which of a model's products the comparison computes with bf16-dot, to see where
// its divergence comes from.
constexpr const char* kProductSetNames = "all, classifier, attention, ffn, gate, up, down";

std::vector<Matrix*> products_named(Model& m, const std::string& name) {
  std::vector<Matrix*> out;
  if (name == "all" || name == "classifier") out.push_back(&m.classifier);
  for (LayerWeights& l : m.layers) {
    if (name == "all" || name == "attention") out.insert(out.end(), {&l.wq, &l.wk, &l.wv, &l.wo});
    if (name == "all" || name == "ffn" || name == "gate") out.push_back(&l.gate);
    if (name == "all" || name == "ffn" || name == "up") out.push_back(&l.up);
    if (name == "all" || name == "ffn" || name == "down") out.push_back(&l.down);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace larql;
  CLI::App app{"larql: top-1/top-5 agreement and KL of the bf16-dot arithmetic against f32, teacher-forced"};
  std::string path, text_path;
  size_t window = 128, max_positions = 2048, threads = 2, k = 5;
  std::string only = "all";
  app.add_option("model", path)->required();
  app.add_option("text", text_path, "text to teacher-force (e.g. tests/data/kjv-heldout.txt)")->required();
  app.add_option("--window", window, "positions per forward pass (each window starts a fresh context)");
  app.add_option("--max-positions", max_positions, "positions compared in all");
  app.add_option("--threads", threads);
  app.add_option("--only", only, std::string("the products that take bf16-dot (the others stay exact): ") + kProductSetNames);
  CLI11_PARSE(app, argc, argv);

  auto exact = load_model(path), dot = load_model(path);
  if (!exact || !dot) return std::fprintf(stderr, "cannot load %s\n", path.c_str()), 1;
  const auto selected = products_named(*dot, only);
  if (selected.empty()) return std::fprintf(stderr, "--only takes %s, not \"%s\"\n", kProductSetNames, only.c_str()), 1;
  for (Matrix* m : selected) m->arithmetic = Arithmetic::bf16_dot;
  auto tokenizer = load_tokenizer_for(*exact, path, std::nullopt);
  if (!tokenizer || !*tokenizer) return std::fprintf(stderr, "%s has no tokenizer\n", path.c_str()), 1;
  std::ifstream in(text_path);
  std::stringstream text;
  text << in.rdbuf();
  const std::vector<int> ids = (*tokenizer)->encode(text.str());
  window = std::min(window, exact->config.context);

  ThreadPool pool(threads);
  LocalFfn exact_ffn(*exact, pool), dot_ffn(*dot, pool);
  size_t positions = 0, top1 = 0, topk = 0;
  double kl_sum = 0, kl_max = 0;
  float max_diff = 0;
  const size_t vocab = exact->config.vocab;
  for (size_t start = 0; start + window <= ids.size() && positions < max_positions; start += window) {
    const std::span<const int> tokens(ids.data() + start, window);
    std::vector<float> a, b;
    Transformer ta(*exact, exact_ffn, pool), tb(*dot, dot_ffn, pool);
    if (!ta.forward_logits(tokens, 0, 0, a) || !tb.forward_logits(tokens, 0, 0, b)) return 1;
    for (size_t p = 0; p < window && positions < max_positions; ++p, ++positions) {
      const auto c = compare_logits({a.data() + p * vocab, vocab}, {b.data() + p * vocab, vocab}, k);
      top1 += c.top1_equal;
      topk += c.topk_equal;
      kl_sum += c.kl;
      kl_max = std::max(kl_max, c.kl);
      max_diff = std::max(max_diff, c.max_abs_diff);
    }
  }
  std::printf("model %s, %zu positions teacher-forced (windows of %zu) from %s\n", path.c_str(), positions, window,
              text_path.c_str());
  std::printf("bf16-dot against f32: top-1 %.4f, top-%zu set %.4f, mean KL %.3g, max KL %.3g, max |dlogit| %.4f\n",
              double(top1) / double(positions), k, double(topk) / double(positions), kl_sum / double(positions), kl_max,
              max_diff);
  return 0;
}
