// One decode product (one token) of our block tiles against llama.cpp's CPU vec_dot on the
// same bytes (larql's block formats are GGML's), alternated product by product in one
// process, so that both see the same memory phase. For issue 55's kernel comparisons;
// not part of the build (it links a llama.cpp you built yourself):
//
//   g++ -O2 -std=c++20 bench/ggml_matvec_ab.cc -Isrc -I$LLAMA/ggml/include
//       build/liblarql_engine.a build/liblarql_base.a -L$LLAMA/build/bin -lggml-cpu
//       -lggml-base -Wl,-rpath,$LLAMA/build/bin -lpthread -o /tmp/ggml_matvec_ab
//   LARQL_CPU_MASK=avx512 /tmp/ggml_matvec_ab --format q4_k --rows 131072 --reps 15
//
// Both run on this process's pool of two threads, llama.cpp's rows split as ours are
// (one contiguous range per thread), and both quantise the token once inside the timed
// call.
// The matrix lives on huge pages as a model's weights do; 131072 rows of 2048 are read
// from memory, 5632 from the caches.
#include <ggml-cpu.h>
#include <ggml.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/block_formats.h"
#include "kernels/matvec.h"
#include "model/huge_pages.h"

int main(int argc, char** argv) {
  using namespace larql;
  size_t rows = 131072, cols = 2048, reps = 15;
  std::string format = "q4_k";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--rows") rows = std::stoul(value);
    else if (flag == "--cols") cols = std::stoul(value);
    else if (flag == "--reps") reps = std::stoul(value);
    else if (flag == "--format") format = value;
    else return std::fprintf(stderr, "unknown option %s (--rows, --cols, --reps, --format)\n", argv[i]), 2;
  }
  const std::optional<DType> type = dtype_from_name(format);
  if (!type || !dtype_is_blocked(*type)) return std::fprintf(stderr, "--format: a block format, e.g. q4_k q6_k q8_0\n"), 2;
  const auto ggml = static_cast<ggml_type>(dtype_traits(*type).ggml_type);  // the format table's GGML id
  ggml_cpu_init();
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0, 1);
  std::vector<float> w(rows * cols), x(cols), ours(rows), theirs(rows);
  for (float& v : w) v = normal(rng);
  for (float& v : x) v = normal(rng);
  ThreadPool pool(2);
  auto region = HugePageRegion::allocate(dtype_bytes(*type, rows * cols));
  if (!region) return std::fprintf(stderr, "%s\n", region.error().message.c_str()), 1;
  const uint8_t* weights = (*region)->begin();
  blocks::quantize_row(*type, w.data(), rows * cols, (*region)->begin());
  const Matrix m{*type, rows, cols, weights};
  const auto* traits = ggml_get_type_traits_cpu(ggml);
  const size_t row_bytes = ggml_row_size(ggml, cols);
  std::vector<uint8_t> token(ggml_row_size(traits->vec_dot_type, cols));
  auto run_theirs = [&] {  // the token quantised once, then shared by both threads
    ggml_get_type_traits_cpu(traits->vec_dot_type)->from_float(x.data(), token.data(), int64_t(cols));
    pool.parallel_for(rows, [&](size_t r0, size_t r1) {
      for (size_t r = r0; r < r1; ++r) traits->vec_dot(int(cols), &theirs[r], 0, weights + r * row_bytes, 0, token.data(), 0, 1);
    }, 64, 1);
  };
  std::vector<double> seconds[2];
  for (size_t rep = 0; rep < reps + 2; ++rep)
    for (int side = 0; side < 2; ++side) {
      const auto start = std::chrono::steady_clock::now();
      if (side == 0) matmul(m, x.data(), 1, ours.data(), pool);
      else run_theirs();
      if (rep >= 2) seconds[side].push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
  double rate[2];
  for (int side = 0; side < 2; ++side) {
    std::sort(seconds[side].begin(), seconds[side].end());
    rate[side] = double(rows * cols) / seconds[side][seconds[side].size() / 2] / 1e9;
  }
  double scale = 0, diff = 0;
  for (size_t r = 0; r < rows; ++r) scale = std::max(scale, double(std::abs(theirs[r]))), diff = std::max(diff, double(std::abs(ours[r] - theirs[r])));
  std::printf("%s %zu x %zu, 2 threads, median of %zu: larql %.1f, llama.cpp %.1f Gweights/s = %.3fx; max |difference| %.3g of max |y| %.3g\n",
              format.c_str(), rows, cols, reps, rate[0], rate[1], rate[0] / rate[1], diff, scale);
  return 0;
}
