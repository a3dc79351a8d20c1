// Decode and prefill speed of the local engine, next to the machine's read bandwidth
// and arithmetic peaks measured in the same run, interleaved (this machine's bandwidth
// moves between levels from minute to minute), with medians over repetitions.
//
//   build/bench/engine_bench MODEL... [--reps 5] [--decode-tokens 32] [--prefill-tokens 128,512]
//                            [--threads 2] [--arithmetic f32,bf16-dot] [--pages huge,mapped]
//
// Each model is measured once per arithmetic (dtype.h; it changes only bf16 weights) and
// per placement of its weights: "huge" copies them to 2 MiB pages as the commands do
// (model/huge_pages.h), "mapped" computes on the file's mapping (--no-huge-pages).
//
// Effective weight bandwidth = bytes of every weight matrix and norm read per decoded
// token (classifier included, embedding lookup excluded; of a mixture-of-experts layer the
// router and the experts a token uses, top-k of them; of Gemma 4's per-layer embeddings the
// projection and the token's row of the table) × decode tokens/s. A prefill's
// share of the peak is taken against its instruction's peak measured just before and just
// after it (the median of the repetitions' shares), not against the run's median peak.
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
#include "model/huge_pages.h"
#include "model/loader.h"
#include "median.h"
#include "peak_flops.h"

namespace {

using Clock = std::chrono::steady_clock;
using namespace larql;
using bench::median;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

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

// One expert's bytes: the mean over the layer's experts (the formats of one file's experts agree).
double expert_bytes(const LayerWeights& l) {
  double bytes = 0;
  for (const ExpertWeights& e : l.experts) bytes += double(e.gate.bytes() + e.up.bytes() + e.down.bytes());
  return l.experts.empty() ? 0 : bytes / double(l.experts.size());
}

size_t decode_weight_bytes(const Model& m) {
  size_t bytes = m.final_norm.bytes() + m.classifier.bytes();
  // Gemma 4's per-layer embeddings: the projection whole, one row of the table per token.
  if (m.config.ple_dim)
    bytes += m.ple_model_proj.bytes() + m.ple_proj_norm.bytes() + dtype_bytes(m.ple_embed.dtype, m.ple_embed.cols);
  for (const auto& l : m.layers) {
    for (const Matrix* w : {&l.attn_norm, &l.wq, &l.wk, &l.wv, &l.wo, &l.bq, &l.bk, &l.bv, &l.q_norm, &l.k_norm,
                            &l.ffn_norm, &l.gate, &l.up, &l.down, &l.router, &l.router_scale, &l.expert_norm,
                            &l.ple_gate, &l.ple_proj, &l.ple_post_norm})
      if (w->data) bytes += w->bytes();
    bytes += size_t(double(m.config.moe.experts_used) * expert_bytes(l));
  }
  return bytes;
}

// Multiply-adds (two flops each) of a prefill's weight products: every layer's for every
// token, the classifier's once (the logits of the prompt's last token only). Counted from
// the matrices' shapes, not their bytes, which differ per weight between the formats of
// one file (Q4_K_M's Q6_K matrices). Attention's own products are left out, so the share
// of a peak is a lower bound.
double prefill_flops(const Model& m, size_t tokens) {
  double per_token = 0;
  for (const auto& l : m.layers) {
    for (const Matrix* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.gate, &l.up, &l.down, &l.router, &l.ple_gate, &l.ple_proj})
      if (w->data) per_token += 2.0 * double(w->rows) * double(w->cols);
    if (!l.experts.empty())  // top-k experts per token
      per_token += double(m.config.moe.experts_used) * 2.0 * 3.0 * double(m.config.moe.expert_ffn) * double(m.config.hidden);
  }
  if (m.ple_model_proj.data) per_token += 2.0 * double(m.ple_model_proj.rows) * double(m.ple_model_proj.cols);
  return per_token * double(tokens) + 2.0 * double(m.classifier.rows) * double(m.classifier.cols);
}

// The peak of the instruction a model's products run on: the block formats' tiles multiply
// with vpdpbusd where the CPU has it, bf16-dot with vdpbf16ps, the rest with f32 FMA.
// The FFN's first gate: the dense one, or a mixture of experts' first expert's.
const Matrix& first_gate(const Model& m) { return m.layers[0].experts.empty() ? m.layers[0].gate : m.layers[0].experts[0].gate; }

std::pair<bench::PeakKind, const char*> peak_of(const Model& m) {
  const Matrix& gate = first_gate(m);
  if (dtype_is_blocked(gate.dtype) && cpu_has_avx512f_bw() && cpu_has_avx512_vnni()) return {bench::PeakKind::int8_dot, "int8 dot"};
  if (gate.effective_arithmetic() == Arithmetic::bf16_dot && cpu_has_avx512_bf16()) return {bench::PeakKind::bf16_dot, "bf16 dot"};
  return {bench::PeakKind::f32_fma, "f32 FMA"};
}

}  // namespace

// The FFN's share of the time (a MoE model's experts, a dense model's MLP): LocalFfn with a
// clock around each call, the decode steps' (one row each) counted apart.
class TimedFfn : public FfnBackend {
 public:
  TimedFfn(const Model& m, ThreadPool& pool) : local_(m, pool) {}
  Status forward(uint32_t layer, std::span<const float> x, size_t rows, std::span<float> out) override {
    return timed(rows, [&] { return local_.forward(layer, x, rows, out); });
  }
  Status experts(uint32_t layer, std::span<const float> x, size_t rows, std::span<const ExpertAssignment> a,
                 std::span<float> out) override {
    return timed(rows, [&] { return local_.experts(layer, x, rows, a, out); });
  }
  Status expert_rows(uint32_t layer, std::span<const float> x, size_t rows, std::span<const ExpertAssignment> a,
                     std::span<float> out) override {
    return timed(rows, [&] { return local_.expert_rows(layer, x, rows, a, out); });
  }
  double decode_seconds = 0;  // in calls of one row

 private:
  template <typename F>
  Status timed(size_t rows, F&& call) {
    const auto start = Clock::now();
    Status s = call();
    if (rows == 1) decode_seconds += seconds_since(start);
    return s;
  }
  LocalFfn local_;
};

struct Measured {
  std::string path, label;
  Arithmetic arithmetic = Arithmetic::f32;
  Model model;
  size_t rss_before = 0, rss_loaded = 0, file_bytes = 0, weight_bytes = 0;
  double load_s = 0;
  std::vector<double> decode_tps;
  std::vector<double> decode_ffn_ms;  // per token
  std::vector<std::vector<double>> prefill_tps;    // per prompt length
  std::vector<std::vector<double>> prefill_share;  // of the peak measured just before and after
};

int main(int argc, char** argv) {
  CLI::App app{"larql engine benchmark: decode and prefill against read bandwidth"};
  std::vector<std::string> paths;
  size_t reps = 5, decode_tokens = 32, threads = 2;
  std::vector<size_t> prefill_tokens{128};
  std::vector<std::string> arithmetics{"f32"}, pages{"huge"};
  app.add_option("models", paths, "model paths; several are measured interleaved, each against the first")->required();
  app.add_option("--reps", reps, "repetitions (medians reported)");
  app.add_option("--decode-tokens", decode_tokens, "tokens decoded per repetition");
  app.add_option("--prefill-tokens", prefill_tokens, "prompt lengths for the prefill measurement")->delimiter(',');
  app.add_option("--threads", threads, "compute threads");
  app.add_option("--arithmetic", arithmetics, "arithmetics to measure each model with: f32, bf16-dot")->delimiter(',');
  app.add_option("--pages", pages, "weights on huge pages (a copy, as the commands do), in the file's mapping, or both: "
                                   "huge, mapped")->delimiter(',');
  CLI11_PARSE(app, argc, argv);
  if (std::find(prefill_tokens.begin(), prefill_tokens.end(), 0) != prefill_tokens.end()) {
    std::fprintf(stderr, "engine_bench: --prefill-tokens takes prompt lengths of at least 1, not 0\n");
    return 2;
  }

  const size_t variants = arithmetics.size() * pages.size();
  std::vector<Measured> models(paths.size() * variants);
  for (size_t i = 0; i < models.size(); ++i) {
    Measured& m = models[i];
    m.path = paths[i / variants];
    const std::string& a_name = arithmetics[i % variants / pages.size()];
    const std::string& placement = pages[i % pages.size()];
    const auto arithmetic = arithmetic_from_name(a_name);
    if (!arithmetic) {
      std::fprintf(stderr, "engine_bench: --arithmetic takes f32 or bf16-dot, not %s\n", a_name.c_str());
      return 2;
    }
    if (placement != "huge" && placement != "mapped") {
      std::fprintf(stderr, "engine_bench: --pages takes huge or mapped, not %s\n", placement.c_str());
      return 2;
    }
    m.arithmetic = *arithmetic;
    m.label = m.path + " [" + std::string(arithmetic_name(m.arithmetic)) + ", " + placement + "]";
    m.prefill_tps.resize(prefill_tokens.size());
    m.prefill_share.resize(prefill_tokens.size());
    m.rss_before = rss_bytes();
    const auto load_start = Clock::now();
    auto loaded = load_model(m.path);
    if (!loaded) {
      std::fprintf(stderr, "engine_bench: %s\n", loaded.error().message.c_str());
      return 1;
    }
    m.model = std::move(*loaded);
    m.model.use_arithmetic(m.arithmetic);
    if (placement == "huge")
      if (auto placed = place_on_huge_pages(m.model, {WeightsUsed::all}); !placed) {
        std::fprintf(stderr, "engine_bench: %s\n", placed.error().message.c_str());
        return 1;
      }
    m.load_s = seconds_since(load_start);
    m.rss_loaded = rss_bytes();
    for (const auto& f : m.model.files) m.file_bytes += f->size();
    m.weight_bytes = decode_weight_bytes(m.model);
  }

  ThreadPool pool(threads);
  std::vector<float> buffer(size_t(1.5 * (1u << 30)) / 4, 1.0f);  // 1.5 GiB, far beyond any cache
  std::vector<double> bandwidth, fma_peak, dot_peak, int8_peak;
  for (size_t r = 0; r < reps + 1; ++r) {  // repetition 0 warms the page cache and is dropped
    const double bw = read_bandwidth(buffer, threads);
    const bench::Peaks peaks = bench::measure_peaks(threads, 0.1);
    if (r > 0)
      bandwidth.push_back(bw), fma_peak.push_back(peaks.f32_fma), dot_peak.push_back(peaks.bf16_dot),
          int8_peak.push_back(peaks.int8_dot);
    for (Measured& m : models) {
      // (Decode starts from the prompt's first 3 tokens.)
      std::vector<int> prompt(std::max<size_t>(3, *std::max_element(prefill_tokens.begin(), prefill_tokens.end())));
      for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = int((i * 7919 + 3) % m.model.config.vocab);
      TimedFfn ffn(m.model, pool);
      Transformer t(m.model, ffn, pool);
      auto gen = generate(t, {prompt.begin(), prompt.begin() + 3},
                          {.max_new_tokens = decode_tokens + 1, .ignore_eos = true, .sampler = {}});
      if (!gen) {
        std::fprintf(stderr, "engine_bench: %s\n", gen.error().message.c_str());
        return 1;
      }
      // A warm engine, as a server's after its first prompt (and llama-bench's after its
      // warm-up run): one untimed prefill of the longest prompt sizes the scratch buffers
      // and the KV cache, which each timed prefill then overwrites from position 0. A new
      // engine's first prefill also faults in ~80 MB of fresh buffers at 512 tokens, which
      // made bf16-dot's up to 17% slower (docs/benchmarks/history.md, "`engine_bench` times a warm engine"); a new
      // sequence's KV cache alone measured no slower than a reused one.
      std::vector<double> prefill_tps, prefill_share;
      const bench::PeakKind kind = peak_of(m.model).first;
      Transformer p(m.model, ffn, pool);
      std::vector<float> logits;
      if (!p.forward(prompt, 0, logits)) return 1;
      // Each prefill between two short measurements of its instruction's peak: the
      // machine's speed drifts within a run (a VM's neighbours), so its share is taken
      // against the peak of the moment.
      for (size_t length : prefill_tokens) {
        const double peak_before = bench::measure_peak(kind, threads, 0.05);
        const auto start = Clock::now();
        if (!p.forward({prompt.data(), length}, 0, logits)) return 1;
        prefill_tps.push_back(double(length) / seconds_since(start));
        const double peak = (peak_before + bench::measure_peak(kind, threads, 0.05)) / 2;
        prefill_share.push_back(prefill_tps.back() * prefill_flops(m.model, length) / double(length) / peak);
      }
      if (r == 0) continue;
      m.decode_tps.push_back(double(decode_tokens) / gen->decode_seconds);
      m.decode_ffn_ms.push_back(1e3 * ffn.decode_seconds / double(decode_tokens));
      std::printf("rep %zu: read %.1f GB/s, peaks %.0f/%.0f/%.0f Gflop/s; %s decode %.2f tok/s (%.1f GB/s of weights), prefill",
                  r, bw / 1e9, peaks.f32_fma / 1e9, peaks.bf16_dot / 1e9, peaks.int8_dot / 1e9, m.label.c_str(), m.decode_tps.back(),
                  m.decode_tps.back() * double(m.weight_bytes) / 1e9);
      for (size_t i = 0; i < prefill_tokens.size(); ++i) {
        m.prefill_tps[i].push_back(prefill_tps[i]);
        m.prefill_share[i].push_back(prefill_share[i]);
        std::printf(" %.1f (%.0f%%)", prefill_tps[i], 100 * prefill_share[i]);
      }
      std::printf(" tok/s\n");
    }
  }
  const double bw = median(bandwidth), fma = median(fma_peak), dot = median(dot_peak), int8 = median(int8_peak);
  std::printf("\nthreads %zu, medians of %zu repetitions\n", threads, reps);
  std::printf("read bandwidth (%zu threads, same run):  %.1f GB/s\n", threads, bw / 1e9);
  std::printf("arithmetic peaks (%zu threads, same run): f32 FMA %.0f Gflop/s, bf16 dot %.0f Gflop/s%s, int8 dot %.0f Gflop/s%s\n",
              threads, fma / 1e9, dot / 1e9, dot > 0 ? "" : " (no AVX512_BF16)", int8 / 1e9, int8 > 0 ? "" : " (no AVX512_VNNI)");
  for (const Measured& m : models) {
    const double dec = median(m.decode_tps);
    const char* peak_name = peak_of(m.model).second;
    const MoeSpec& moe = m.model.config.moe;
    std::printf("\nmodel %s: %zu layers, hidden %zu, ffn %zu, vocab %zu, weights %s", m.label.c_str(), m.model.config.layers,
                m.model.config.hidden, m.model.config.ffn, m.model.config.vocab, std::string(dtype_name(first_gate(m.model).dtype)).c_str());
    if (moe.experts) std::printf(", %zu experts of %zu, top-%zu", moe.experts, moe.expert_ffn, moe.experts_used);
    std::printf("\n");
    std::printf("decode:   %.2f tok/s; weight bytes per token %.3f GB; effective %.1f GB/s = %.2fx read bandwidth\n", dec,
                double(m.weight_bytes) / 1e9, dec * double(m.weight_bytes) / 1e9, dec * double(m.weight_bytes) / bw);
    std::printf("          %s %.2f ms of the %.2f ms per token\n", moe.experts ? "experts (FFN calls)" : "FFN", median(m.decode_ffn_ms),
                1e3 / dec);
    for (size_t i = 0; i < prefill_tokens.size(); ++i) {
      const double pre = median(m.prefill_tps[i]);
      const double flops_per_s = pre * prefill_flops(m.model, prefill_tokens[i]) / double(prefill_tokens[i]);
      std::printf("prefill:  %.1f tok/s (%zu-token prompt); weight products %.0f Gflop/s = %.0f%% of the %s peak measured around it\n",
                  pre, prefill_tokens[i], flops_per_s / 1e9, 100 * median(m.prefill_share[i]), peak_name);
      if (&m != &models.front())
        std::printf("against %s: prefill %.2fx\n", models.front().label.c_str(), pre / median(models.front().prefill_tps[i]));
    }
    if (&m != &models.front())
      std::printf("against %s: decode %.2fx, weight bytes %.2fx\n", models.front().label.c_str(),
                  dec / median(models.front().decode_tps), double(m.weight_bytes) / double(models.front().weight_bytes));
    std::printf("memory:   load %.3f s; RSS %.0f MB before load, %.0f MB after load; weights on disk %.0f MB, on huge pages %.0f MB\n",
                m.load_s, m.rss_before / 1e6, m.rss_loaded / 1e6, m.file_bytes / 1e6,
                m.model.huge_pages ? m.model.huge_pages->bytes() / 1e6 : 0.0);
  }
  return 0;
}
