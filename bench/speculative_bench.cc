// What speculative decoding costs locally when its drafts are never right, against plain
// greedy decoding in the same run (issue 50: at most 5% slower, the draft length falling to
// none). The drafts are wrong by construction: each is one past the token plain decoding
// chose there. Also the lookup draft on the same prompt, for comparison.
//
//   build/bench/speculative_bench MODEL [--steps 128] [--reps 5] [--threads 2]
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <utility>

#include "infer/generate.h"
#include "infer/local_ffn.h"
#include "model/loader.h"
#include "median.h"

using namespace larql;

int main(int argc, char** argv) {
  CLI::App app{"speculative decoding against plain greedy decoding, locally"};
  std::string path;
  size_t steps = 128, reps = 5, threads = 2;
  app.add_option("model", path)->required();
  app.add_option("--steps", steps);
  app.add_option("--reps", reps);
  app.add_option("--threads", threads);
  CLI11_PARSE(app, argc, argv);
  auto model = load_model(path);
  if (!model) return std::fprintf(stderr, "%s\n", model.error().message.c_str()), 2;
  ThreadPool pool(threads);
  LocalFfn ffn(*model, pool);
  const std::vector<int> prompt{1, 2, 3, 4};
  auto decode = [&](std::optional<SpeculativeOptions> spec, GenerateResult* out) {
    Transformer t(*model, ffn, pool);
    const auto start = std::chrono::steady_clock::now();
    GenerateOptions options{.max_new_tokens = steps, .ignore_eos = true};
    options.speculative = std::move(spec);
    auto r = generate(t, prompt, options);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!r) std::fprintf(stderr, "%s\n", r.error().message.c_str()), std::exit(1);
    *out = *r;
    return s;
  };
  GenerateResult plain;
  decode(std::nullopt, &plain);  // warm-up, and the truth the wrong drafts are built from
  std::vector<int> truth = prompt;
  truth.insert(truth.end(), plain.generated.begin(), plain.generated.end());
  SpeculativeOptions wrong;
  wrong.draft = [&](std::span<const int> context, size_t k) {
    std::vector<int> out;
    for (size_t i = 0; i < k && context.size() + i < truth.size(); ++i)
      out.push_back((truth[context.size() + i] + 1) % int(model->config.vocab));
    return out;
  };
  std::vector<double> plain_s, wrong_s, lookup_s;
  GenerateResult w, l;
  for (size_t r = 0; r < reps; ++r) {  // interleaved, so that the machine's phases fall on all three
    plain_s.push_back(decode(std::nullopt, &plain));
    wrong_s.push_back(decode(wrong, &w));
    lookup_s.push_back(decode(SpeculativeOptions{}, &l));
  }
  const double p = bench::median(plain_s), ws = bench::median(wrong_s), ls = bench::median(lookup_s);
  std::printf("model %s, %zu greedy tokens after a 4-token prompt, %zu threads, medians of %zu\n", path.c_str(), steps, threads, reps);
  std::printf("plain:              %8.2f tok/s  %3zu passes\n", double(steps) / p, plain.passes);
  std::printf("drafts never right: %8.2f tok/s  %3zu passes, %zu of %zu drafts kept, %.3fx plain's time\n", double(steps) / ws,
              w.passes, w.accepted, w.drafted, ws / p);
  std::printf("lookup drafts:      %8.2f tok/s  %3zu passes, %zu of %zu drafts kept, %.3fx plain's time, same ids: %s\n",
              double(steps) / ls, l.passes, l.accepted, l.drafted, ls / p, l.generated == plain.generated ? "yes" : "no");
  return 0;
}
