// Decode and prefill speed of the local engine, next to the machine's read bandwidth
// measured in the same run, interleaved (this machine's bandwidth moves between levels
// from minute to minute), with medians over repetitions.
//
//   build/bench/engine_bench MODEL [--reps 5] [--decode-tokens 32] [--prefill-tokens 128] [--threads 2]
//
// Effective weight bandwidth = bytes of every weight matrix and norm read per decoded
// token (classifier included, embedding lookup excluded) × decode tokens/s.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "infer/generate.h"
#include "infer/local_ffn.h"
#include "model/loader.h"

namespace {

using Clock = std::chrono::steady_clock;
using namespace larql;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

size_t rss_bytes() {
  std::ifstream status("/proc/self/status");
  std::string key;
  while (status >> key) {
    if (key == "VmRSS:") {
      size_t kb;
      status >> kb;
      return kb * 1024;
    }
    status.ignore(1 << 12, '\n');
  }
  return 0;
}

#if defined(__x86_64__)
__attribute__((target("avx2"))) float sum_floats(const float* p, size_t n) {
  __m256 a = _mm256_setzero_ps(), b = a, c = a, d = a;
  for (size_t i = 0; i + 32 <= n; i += 32) {
    a = _mm256_add_ps(a, _mm256_loadu_ps(p + i));
    b = _mm256_add_ps(b, _mm256_loadu_ps(p + i + 8));
    c = _mm256_add_ps(c, _mm256_loadu_ps(p + i + 16));
    d = _mm256_add_ps(d, _mm256_loadu_ps(p + i + 24));
  }
  alignas(32) float o[8];
  _mm256_store_ps(o, _mm256_add_ps(_mm256_add_ps(a, b), _mm256_add_ps(c, d)));
  return o[0] + o[7];
}
#else
float sum_floats(const float* p, size_t n) { return std::accumulate(p, p + n, 0.0f); }
#endif

// Sequential read bandwidth with `threads` threads, each reading its own contiguous half.
double read_bandwidth(const std::vector<float>& buffer, size_t threads) {
  const size_t per = buffer.size() / threads;
  std::vector<float> sink(threads);
  const auto start = Clock::now();
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back([&, t] { sink[t] = sum_floats(buffer.data() + t * per, per); });
  sink[0] = sum_floats(buffer.data(), per);
  for (auto& th : pool) th.join();
  const double s = seconds_since(start);
  if (sink[0] != sink[0]) std::puts("");  // keep the sums alive
  return double(per * threads * 4) / s;
}

size_t decode_weight_bytes(const Model& m) {
  size_t bytes = m.final_norm.bytes() + m.classifier.bytes();
  for (const auto& l : m.layers)
    for (const Matrix* w : {&l.attn_norm, &l.wq, &l.wk, &l.wv, &l.wo, &l.bq, &l.bk, &l.bv, &l.q_norm, &l.k_norm,
                            &l.ffn_norm, &l.gate, &l.up, &l.down})
      if (w->data) bytes += w->bytes();
  return bytes;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"larql engine benchmark: decode and prefill against read bandwidth"};
  std::string path;
  size_t reps = 5, decode_tokens = 32, prefill_tokens = 128, threads = 2;
  app.add_option("model", path, "model path")->required();
  app.add_option("--reps", reps, "repetitions (medians reported)");
  app.add_option("--decode-tokens", decode_tokens, "tokens decoded per repetition");
  app.add_option("--prefill-tokens", prefill_tokens, "prompt length for the prefill measurement");
  app.add_option("--threads", threads, "compute threads");
  CLI11_PARSE(app, argc, argv);

  const size_t rss_before = rss_bytes();
  const auto load_start = Clock::now();
  auto model = load_model(path);
  if (!model) {
    std::fprintf(stderr, "engine_bench: %s\n", model.error().message.c_str());
    return 1;
  }
  const double load_s = seconds_since(load_start);
  const size_t rss_loaded = rss_bytes();
  size_t file_bytes = 0;
  for (const auto& f : model->files) file_bytes += f->size();
  const size_t weight_bytes = decode_weight_bytes(*model);

  ThreadPool pool(threads);
  LocalFfn ffn(*model, pool);
  std::vector<float> buffer(size_t(1.5 * (1u << 30)) / 4, 1.0f);  // 1.5 GiB, far beyond any cache

  std::vector<int> prompt(prefill_tokens);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = int((i * 7919 + 3) % model->config.vocab);

  std::vector<double> bandwidth, decode_tps, prefill_tps;
  for (size_t r = 0; r < reps + 1; ++r) {  // repetition 0 warms the page cache and is dropped
    const double bw = read_bandwidth(buffer, threads);
    Transformer t(*model, ffn, pool);
    auto gen = generate(t, {prompt.begin(), prompt.begin() + 3},
                        {.max_new_tokens = decode_tokens + 1, .ignore_eos = true, .sampler = {}});
    if (!gen) {
      std::fprintf(stderr, "engine_bench: %s\n", gen.error().message.c_str());
      return 1;
    }
    Transformer p(*model, ffn, pool);
    std::vector<float> logits;
    const auto start = Clock::now();
    if (!p.forward(prompt, 0, logits)) return 1;
    const double prefill_s = seconds_since(start);
    if (r == 0) continue;
    bandwidth.push_back(bw);
    decode_tps.push_back(double(decode_tokens) / gen->decode_seconds);
    prefill_tps.push_back(double(prompt.size()) / prefill_s);
    std::printf("rep %zu: read %.1f GB/s, decode %.2f tok/s (%.1f GB/s of weights), prefill %.1f tok/s\n", r, bw / 1e9,
                decode_tps.back(), decode_tps.back() * double(weight_bytes) / 1e9, prefill_tps.back());
  }
  const double bw = median(bandwidth), dec = median(decode_tps), pre = median(prefill_tps);
  std::printf("\nmodel %s: %zu layers, hidden %zu, ffn %zu, vocab %zu, weights %s\n", model->config.name.c_str(),
              model->config.layers, model->config.hidden, model->config.ffn, model->config.vocab,
              std::string(dtype_name(model->layers[0].gate.dtype)).c_str());
  std::printf("threads %zu, medians of %zu repetitions\n", threads, reps);
  std::printf("read bandwidth (%zu threads, same run):  %.1f GB/s\n", threads, bw / 1e9);
  std::printf("decode:   %.2f tok/s; weight bytes per token %.3f GB; effective %.1f GB/s = %.2fx read bandwidth\n", dec,
              double(weight_bytes) / 1e9, dec * double(weight_bytes) / 1e9, dec * double(weight_bytes) / bw);
  std::printf("prefill:  %.1f tok/s (%zu-token prompt)\n", pre, prompt.size());
  std::printf("memory:   load %.3f s; RSS %.0f MB before load, %.0f MB after load (mapped, untouched), %.0f MB after "
              "running; weights on disk %.0f MB\n",
              load_s, rss_before / 1e6, rss_loaded / 1e6, (rss_bytes() - buffer.size() * 4) / 1e6, file_bytes / 1e6);
  return 0;
}
