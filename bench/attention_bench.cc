// Attention's two kernels (kernels/attention.h) on one thread, the shape of a prefill's
// last rows: the query heads of one key-value head against `seen` keys and values of a
// layer's cache, laid out as KvCache keeps them (each head's positions contiguous, the keys
// in blocks). Three ways in the same run, with the same bits: one score and one head's
// weighted sum at a time (the contracts' plain loops), key_scores() and weighted_sum() one
// head at a time, and the heads of the group together (as the transformer calls them). And
// the softmax of each score row against the loop it replaced, which called the C library's
// expf.
//
//   build/bench/attention_bench [--head-dim 64] [--group 4] [--kv-heads 8] [--seen 512] [--reps 9]
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "kernels/attention.h"
#include "kernels/ops.h"
#include "median.h"

namespace {

// softmax() as it was: the C library's expf, summed as it goes.
void softmax_with_libc_expf(float* x, size_t n) {
  const float max = *std::max_element(x, x + n);
  float sum = 0;
  for (size_t i = 0; i < n; ++i) sum += x[i] = std::exp(x[i] - max);
  for (size_t i = 0; i < n; ++i) x[i] /= sum;
}

// Median seconds per call of fn over `reps` timed rounds of `calls` calls.
template <class F>
double median_seconds(size_t reps, size_t calls, F&& fn) {
  std::vector<double> times;
  for (size_t r = 0; r < reps; ++r) {
    const auto start = std::chrono::steady_clock::now();
    for (size_t c = 0; c < calls; ++c) fn(c);
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / double(calls));
  }
  return larql::bench::median(times);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace larql;
  CLI::App app{"larql attention benchmark: scores and weighted sums of one key-value head's query heads"};
  size_t hd = 64, group = 4, kv_heads = 8, seen = 512, reps = 9;
  app.add_option("--head-dim", hd);
  app.add_option("--group", group, "query heads per key-value head");
  app.add_option("--kv-heads", kv_heads, "key-value heads in the cache (calls go round them)");
  app.add_option("--seen", seen, "positions attended to");
  app.add_option("--reps", reps, "timed rounds (the median is reported)");
  CLI11_PARSE(app, argc, argv);

  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0, 1);
  std::vector<float> queries(group * hd), cache(kv_heads * seen * hd), scores(group * seen), sums(group * hd);
  for (float& v : queries) v = normal(rng);
  for (float& v : cache) v = normal(rng);
  const size_t calls = std::max<size_t>(1, (size_t(1) << 27) / (group * seen * hd));
  auto cache_rows = [&](size_t call) { return StridedRows{cache.data() + call % kv_heads * seen * hd, seen, hd}; };

  // The keys as KvCache keeps them: each head's in blocks of positions (attention.h).
  const size_t key_stride = key_floats(seen, hd);
  std::vector<float> key_cache(kv_heads * key_stride);
  for (size_t h = 0; h < kv_heads; ++h)
    for (size_t p = 0; p < seen; ++p)
      for (size_t d = 0; d < hd; ++d) key_cache[h * key_stride + key_offset(p, d, hd)] = cache[(h * seen + p) * hd + d];
  auto keys = [&](size_t call) { return key_cache.data() + call % kv_heads * key_stride; };

  // Scores: one at a time, key_scores() per head, key_scores() for the group; scaled by
  // 1/√d as the transformer's are.
  const float scale = 1.0f / std::sqrt(float(hd));
  const double plain = median_seconds(reps, calls, [&](size_t call) {
    const StridedRows k = cache_rows(call);
    for (size_t j = 0; j < group; ++j)
      for (size_t r = 0; r < seen; ++r) {
        float s = 0;
        for (size_t d = 0; d < hd; ++d) s = std::fma(queries[j * hd + d], k.row(r)[d], s);
        scores[j * seen + r] = s * scale;
      }
  });
  const std::vector<float> plain_scores = scores;
  const double per_head = median_seconds(reps, calls, [&](size_t call) {
    for (size_t j = 0; j < group; ++j) key_scores({queries.data() + j * hd, 1, hd}, keys(call), hd, 0, seen, scale, scores.data() + j * seen, seen);
  });
  if (scores != plain_scores) return std::fprintf(stderr, "attention_bench: key_scores() differs from the plain loop\n"), 1;
  const double grouped =
      median_seconds(reps, calls, [&](size_t call) { key_scores({queries.data(), group, hd}, keys(call), hd, 0, seen, scale, scores.data(), seen); });
  if (scores != plain_scores) return std::fprintf(stderr, "attention_bench: key_scores() differs from the plain loop\n"), 1;

  // Softmax of each head's scores, on a copy.
  std::vector<float> rows(scores.size());
  const double libc_softmax = median_seconds(reps, calls, [&](size_t) {
    rows = scores;
    for (size_t j = 0; j < group; ++j) softmax_with_libc_expf(rows.data() + j * seen, seen);
  });
  const double our_softmax = median_seconds(reps, calls, [&](size_t) {
    rows = scores;
    for (size_t j = 0; j < group; ++j) softmax(rows.data() + j * seen, seen);
  });
  const std::vector<float> row_by_row = rows;
  const double rows_together = median_seconds(reps, calls, [&](size_t) {
    rows = scores;
    softmax_rows(rows.data(), group, seen, seen);
  });
  if (rows != row_by_row) return std::fprintf(stderr, "attention_bench: softmax_rows differs from softmax\n"), 1;
  const double copying = median_seconds(reps, calls, [&](size_t) { rows = scores; });

  // Weighted sums of the values (the scores as weights): one head at a time, the group.
  for (float& s : scores) s = std::abs(s) / float(seen);
  const double sum_per_head = median_seconds(reps, calls, [&](size_t call) {
    for (size_t j = 0; j < group; ++j) weighted_sum({scores.data() + j * seen, 1, seen}, cache_rows(call), hd, sums.data() + j * hd);
  });
  const std::vector<float> head_sums = sums;
  const double sum_grouped =
      median_seconds(reps, calls, [&](size_t call) { weighted_sum({scores.data(), group, seen}, cache_rows(call), hd, sums.data()); });
  if (sums != head_sums) return std::fprintf(stderr, "attention_bench: grouped weighted_sum differs\n"), 1;

  const double pairs = double(group * seen);
  std::printf("head dim %zu, %zu query heads per key-value head, %zu key-value heads, %zu positions, 1 thread\n", hd, group,
              kv_heads, seen);
  std::printf("scores:        one at a time %6.2f ns, key_scores() per head %6.2f ns, heads together %6.2f ns per score (%.2fx, %.2fx)\n",
              plain / pairs * 1e9, per_head / pairs * 1e9, grouped / pairs * 1e9, plain / grouped, per_head / grouped);
  std::printf("softmax:       with the C library's expf %6.2f ns, softmax() %6.2f ns, heads together %6.2f ns per score (%.2fx, %.2fx)\n",
              (libc_softmax - copying) / pairs * 1e9, (our_softmax - copying) / pairs * 1e9, (rows_together - copying) / pairs * 1e9,
              (libc_softmax - copying) / (our_softmax - copying), (our_softmax - copying) / (rows_together - copying));
  std::printf("weighted sums: one head at a time %6.2f ns, heads together %6.2f ns per position and head (%.2fx)\n",
              sum_per_head / pairs * 1e9, sum_grouped / pairs * 1e9, sum_per_head / sum_grouped);
}
