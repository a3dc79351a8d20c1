// A mixture-of-experts layer's products against a dense FFN's of the same bytes, from
// memory, interleaved step by step: what the expert path costs per byte over the dense one
// without the rest of a model (and without its phases: both are timed in the same moments).
//
//   build/bench/expert_bench [--experts 128] [--used 8] [--width 768] [--hidden 2048]
//                            [--format q4_k] [--down-format q4_k] [--steps 2000]
//
// A step of the experts: gate and up of `used` experts chosen at random (one job, one
// input), then their downs (one job, each its own input), as MoeFfn runs a decode step.
// A step of the dense FFN: gate and up of width used × width (one job), then the down.
// The dense FFN cycles through enough layers to read as many bytes as the experts hold,
// so that neither finds its weights in cache.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/block_formats.h"
#include "kernels/matvec.h"
#include "model/huge_pages.h"

namespace {

using namespace larql;

// Matrices of rows × cols in one huge-page region, random values quantised to `type`.
struct Matrices {
  std::shared_ptr<HugePageRegion> region;
  std::vector<Matrix> each;
};

Matrices make_matrices(DType type, size_t count, size_t rows, size_t cols, std::mt19937& rng) {
  const size_t bytes = dtype_bytes(type, rows * cols);
  auto region = HugePageRegion::allocate(bytes * count);
  if (!region) {
    std::fprintf(stderr, "expert_bench: %s\n", region.error().message.c_str());
    std::exit(1);
  }
  std::normal_distribution<float> normal(0, 1);
  std::vector<float> values(rows * cols);
  Matrices m{*region, {}};
  for (size_t i = 0; i < count; ++i) {
    // (4 distinct matrices are random enough; copies are as slow)
    uint8_t* at = m.region->begin() + i * bytes;
    if (i < 4) {
      for (float& v : values) v = normal(rng);
      blocks::quantize_row(type, values.data(), rows * cols, at);
    } else {
      std::memcpy(at, at - 4 * bytes, bytes);
    }
    m.each.push_back(Matrix{type, rows, cols, at});
  }
  return m;
}

double median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + std::ptrdiff_t(v.size() / 2), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"larql expert benchmark: a MoE layer's products against a dense FFN's of the same bytes"};
  size_t experts = 128, used = 8, width = 768, hidden = 2048, steps = 2000, threads = 2;
  std::string format_name = "q4_k", down_format_name = "q4_k";
  app.add_option("--experts", experts);
  app.add_option("--used", used, "experts a token uses");
  app.add_option("--width", width, "an expert's inner width");
  app.add_option("--hidden", hidden);
  app.add_option("--format", format_name, "the gate and up matrices' format");
  app.add_option("--down-format", down_format_name, "the down matrices' format");
  app.add_option("--steps", steps, "steps of each, interleaved");
  app.add_option("--threads", threads);
  CLI11_PARSE(app, argc, argv);
  const auto format = dtype_from_name(format_name), down_format = dtype_from_name(down_format_name);
  if (!format || !down_format || used == 0 || used > experts || steps == 0) {
    std::fprintf(stderr, "expert_bench: formats must be weight formats (e.g. q4_k), 0 < used <= experts, steps > 0\n");
    return 2;
  }

  std::mt19937 rng(1);
  const Matrices gate = make_matrices(*format, experts, width, hidden, rng), up = make_matrices(*format, experts, width, hidden, rng);
  const Matrices down = make_matrices(*down_format, experts, hidden, width, rng);
  const size_t layers = experts / used, dense_width = used * width;  // as many bytes as the experts
  const Matrices dense_gate = make_matrices(*format, layers, dense_width, hidden, rng);
  const Matrices dense_up = make_matrices(*format, layers, dense_width, hidden, rng);
  const Matrices dense_down = make_matrices(*down_format, layers, hidden, dense_width, rng);

  ThreadPool pool(threads);
  std::normal_distribution<float> normal(0, 1);
  std::vector<float> x(hidden), inner(used * width), inner_up(used * width), out(used * hidden);
  for (float& v : x) v = normal(rng);
  for (float& v : inner) v = normal(rng);
  std::vector<uint32_t> ids(experts);
  std::iota(ids.begin(), ids.end(), 0u);
  std::vector<InputProduct> products;

  auto expert_step = [&] {
    std::shuffle(ids.begin(), ids.end(), rng);
    std::sort(ids.begin(), ids.begin() + std::ptrdiff_t(used));
    products.clear();
    for (size_t i = 0; i < used; ++i) {
      products.push_back({&gate.each[ids[i]], x.data(), 1, &inner[i * width]});
      products.push_back({&up.each[ids[i]], x.data(), 1, &inner_up[i * width]});
    }
    matmul_each(products, pool);
    products.clear();
    for (size_t i = 0; i < used; ++i) products.push_back({&down.each[ids[i]], &inner[i * width], 1, &out[i * hidden]});
    matmul_each(products, pool);
  };
  size_t layer = 0;
  auto dense_step = [&] {
    const Product gate_up[] = {{&dense_gate.each[layer], inner.data()}, {&dense_up.each[layer], inner_up.data()}};
    matmul_shared_input(gate_up, x.data(), 1, pool);
    matmul(dense_down.each[layer], inner.data(), 1, out.data(), pool);
    layer = (layer + 1) % layers;
  };

  using Clock = std::chrono::steady_clock;
  auto time = [](auto&& step) {
    const auto start = Clock::now();
    step();
    return std::chrono::duration<double>(Clock::now() - start).count();
  };
  for (size_t i = 0; i < 50; ++i) expert_step(), dense_step();
  std::vector<double> expert_s, dense_s;
  for (size_t i = 0; i < steps; ++i) {
    expert_s.push_back(time(expert_step));
    dense_s.push_back(time(dense_step));
  }
  const double step_bytes = double(2 * dtype_bytes(*format, width * hidden) + dtype_bytes(*down_format, hidden * width)) * double(used);
  const double e = median(expert_s), d = median(dense_s);
  std::printf("%zu of %zu experts of %zu x %zu (%s, downs %s), %zu threads, medians of %zu interleaved steps; %.1f MB a step\n", used,
              experts, width, hidden, format_name.c_str(), down_format_name.c_str(), threads, steps, step_bytes / 1e6);
  std::printf("experts: %8.1f us  %6.1f GB/s\n", e * 1e6, step_bytes / e / 1e9);
  std::printf("dense:   %8.1f us  %6.1f GB/s  (%zu layers of width %zu cycled)\n", d * 1e6, step_bytes / d / 1e9, layers, dense_width);
  std::printf("experts / dense rate per byte: %.3f\n", d / e);
  return 0;
}
