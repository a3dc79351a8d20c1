// One matrix-vector product per weight format, the same random matrix in each, timed on
// its own: what a decode step's kernels do without the rest of the model. With --tokens
// N > 1 a matrix-matrix product of N tokens instead (prefill, batches), reported in
// Gflop/s next to the machine's peaks measured in the same run (peak_flops.h).
//
//   build/bench/matvec_bench [--rows 65536] [--cols 2048] [--tokens 1] [--threads 2] [--reps 30]
//
// Rows × cols large enough to leave the caches (the default is 256 MB in bf16) measure
// from memory; small ones (5632 × 2048) measure the kernels in cache. bf16 appears twice:
// with the f32 arithmetic and with bf16-dot (bf16_dot.h). The weights are on huge pages
// where the kernel gives them, as the commands place a model's (model/huge_pages.h).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "kernels/block_formats.h"
#include "kernels/matvec.h"
#include "model/huge_pages.h"
#include "peak_flops.h"

int main(int argc, char** argv) {
  using namespace larql;
  CLI::App app{"larql matvec benchmark: each weight format on the same matrix"};
  size_t rows = 65536, cols = 2048, tokens = 1, threads = 2, reps = 30;
  app.add_option("--rows", rows);
  app.add_option("--cols", cols, "a multiple of 32");
  app.add_option("--tokens", tokens, "tokens per product (1: matvec)");
  app.add_option("--threads", threads);
  app.add_option("--reps", reps, "timed products (the median is reported)");
  std::vector<std::string> only;
  app.add_option("--formats", only, "formats to measure (default: all), e.g. bf16 q8_0");
  CLI11_PARSE(app, argc, argv);

  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0, 1);
  std::vector<float> w(rows * cols), x(tokens * cols), y(tokens * rows);
  for (float& v : w) v = normal(rng);
  for (float& v : x) v = normal(rng);
  ThreadPool pool(threads);
  std::printf("%zu x %zu, %zu token(s), %zu threads, median of %zu\n", rows, cols, tokens, threads, reps);
  if (tokens > 1) {
    const bench::Peaks peaks = bench::measure_peaks(threads);
    std::printf("peaks (same run, %zu threads): f32 FMA %.1f Gflop/s, bf16 dot %.1f Gflop/s%s, int8 dot %.1f Gflop/s%s\n", threads,
                peaks.f32_fma / 1e9, peaks.bf16_dot / 1e9, peaks.bf16_dot ? "" : " (no AVX512_BF16)", peaks.int8_dot / 1e9,
                peaks.int8_dot ? "" : " (no AVX512_VNNI)");
  }
  auto measure = [&](const Matrix& m, const std::string& name, size_t bytes) {
    for (int i = 0; i < 3; ++i) matmul(m, x.data(), tokens, y.data(), pool);
    std::vector<double> seconds;
    for (size_t i = 0; i < reps; ++i) {
      const auto start = std::chrono::steady_clock::now();
      matmul(m, x.data(), tokens, y.data(), pool);
      seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    std::nth_element(seconds.begin(), seconds.begin() + std::ptrdiff_t(reps / 2), seconds.end());
    const double s = seconds[reps / 2];
    std::printf("%-14s %8.3f ms  %6.1f GB/s  %6.2f Gweights/s  %7.1f Gflop/s\n", name.c_str(), s * 1e3, double(bytes) / s / 1e9,
                double(rows * cols) / s / 1e9, 2.0 * double(rows * cols * tokens) / s / 1e9);
  };
  for (const auto& format : kDTypes) {
    if (!only.empty() && std::find(only.begin(), only.end(), format.name) == only.end()) continue;
    const size_t bytes = dtype_bytes(format.type, rows * cols);
    Result<std::shared_ptr<HugePageRegion>> region = HugePageRegion::allocate(bytes);
    if (!region) {
      std::fprintf(stderr, "%s\n", region.error().message.c_str());
      return 1;
    }
    blocks::quantize_row(format.type, w.data(), rows * cols, (*region)->begin());
    const Matrix m{format.type, rows, cols, (*region)->begin()};
    measure(m, std::string(format.name), bytes);
    if (format.type == DType::bf16) {
      Matrix dot = m;
      dot.arithmetic = Arithmetic::bf16_dot;
      measure(dot, "bf16 bf16-dot", bytes);
    }
  }
  return 0;
}
