// One prefill tile of the block formats (4 rows × 4 tokens, the AVX-512 VNNI tiles), its
// rows and tokens in L1, timed on one thread: what the tiles' code costs without memory or
// threads. Reported per step, one output's pair of 32-value blocks (block_dot.h's
// contract: a vpdpbusd, a scale, a conversion and an FMA), next to a register-only loop of
// those four instructions measured in the same run: the step's floor on this core. Where
// a product keeps rows unpacked (keeps_unpacked_rows), the tile reads them so, as every
// tile in a token block but the first does (Tile::unpacked_rows).
//
// The K-quants have their own tile (kquant_dot.h) and are not measured here.
//
//   build/bench/block_tile_bench [--cols 2048] [--formats q8_0 q4_1]
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "base/cpu_features.h"
#include "best_time.h"
#include "kernels/block_formats.h"
#include "kernels/matvec_tiles.h"

#if !defined(__x86_64__)
int main() {
  std::printf("block_tile_bench measures the x86-64 AVX-512 VNNI tiles\n");
  return 0;
}
#else
namespace {

constexpr size_t kRows = 4, kTokens = 4, kSteps = kRows * kTokens;  // per pair of blocks

// GCC 12's _mm512_cvtepi32_ps and _mm512_permutexvar_ps start from an undefined register,
// which it warns about once they are inlined here.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
// kSteps independent steps per iteration, as a 4 × 4 tile's pair: row r's weights meet
// token j's activations, the dots start from zero and the scale is a permute of a product
// in a register.
__attribute__((target("avx512f,avx512bw,avx512vnni"), noinline)) float step_loop(size_t iterations) {
  __m512 acc[kSteps], scale[kSteps];
  __m512i w0 = _mm512_set1_epi8(3), w1 = _mm512_set1_epi8(5), w2 = _mm512_set1_epi8(7), w3 = _mm512_set1_epi8(9);
  __m512i x0 = _mm512_set1_epi8(-2), x1 = _mm512_set1_epi8(-4), x2 = _mm512_set1_epi8(6), x3 = _mm512_set1_epi8(8);
  for (size_t s = 0; s < kSteps; ++s) acc[s] = _mm512_setzero_ps(), scale[s] = _mm512_set1_ps(1e-6f * float(s));
  const __m512i index = _mm512_set1_epi32(9);
  for (size_t it = 0; it < iterations; ++it) {
    const __m512i w[kRows] = {w0, w1, w2, w3}, x[kTokens] = {x0, x1, x2, x3};
#pragma GCC unroll 16
    for (size_t s = 0; s < kSteps; ++s) {
      const __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w[s / kTokens], x[s % kTokens]);
      acc[s] = _mm512_fmadd_ps(_mm512_permutexvar_ps(index, scale[s]), _mm512_cvtepi32_ps(p), acc[s]);
    }
    // New operands on every iteration, as far as GCC knows.
    asm volatile("" : "+v"(w0), "+v"(w1), "+v"(w2), "+v"(w3), "+v"(x0), "+v"(x1), "+v"(x2), "+v"(x3));
  }
  float sum = 0;
  alignas(64) float lanes[16];
  for (const __m512& a : acc) {
    _mm512_store_ps(lanes, a);
    sum += lanes[0];
  }
  return sum;
}
#pragma GCC diagnostic pop

}  // namespace

int main(int argc, char** argv) {
  using namespace larql;
  CLI::App app{"larql block tile benchmark: one 4 x 4 prefill tile in L1 against the contract's step"};
  size_t cols = 2048;
  std::vector<std::string> only;
  app.add_option("--cols", cols, "a multiple of 256");
  app.add_option("--formats", only, "formats to measure (default: every block format), e.g. q8_0 q4_k");
  CLI11_PARSE(app, argc, argv);
  if (cols == 0 || cols % blocks::kSuperValues != 0) {
    std::fprintf(stderr, "block_tile_bench: --cols must be a positive multiple of 256, got %zu\n", cols);
    return 2;
  }
  if (!cpu_has_avx512f_bw() || !cpu_has_avx512_vnni()) {
    std::printf("block_tile_bench measures the AVX-512 VNNI tiles; this CPU (or LARQL_CPU_MASK) has no AVX-512 VNNI\n");
    return 0;
  }

  const size_t loop_iterations = 2'000'000;
  const double step_ns = bench::best_seconds(7, [&] { volatile float s = step_loop(loop_iterations); (void)s; }) /
                         double(loop_iterations * kSteps) * 1e9;
  std::printf("%zu x %zu tile, %zu columns, one thread; the contract's step, registers only: %.3f ns\n", kRows, kTokens, cols,
              step_ns);

  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0, 1);
  std::vector<float> w(kRows * cols), x(kTokens * cols), y(kTokens * kRows);
  for (float& v : w) v = normal(rng);
  for (float& v : x) v = normal(rng);
  ThreadPool one(1);
  QuantizedActivations qa;
  qa.quantize(x.data(), kTokens, cols, true, one);
  for (const auto& format : kDTypes) {
    if (!dtype_is_blocked(format.type) || blocks::is_kquant(format.type)) continue;
    if (!only.empty() && std::find(only.begin(), only.end(), format.name) == only.end()) continue;
    std::vector<uint8_t> bytes(dtype_bytes(format.type, kRows * cols));
    blocks::quantize_row(format.type, w.data(), kRows * cols, bytes.data());
    const Matrix m{format.type, kRows, cols, bytes.data()};
    std::vector<uint8_t> unpacked(kRows * UnpackedRow::bytes(cols));
    Tile tile{&m, x.data(), y.data(), 0, kRows, 0, kTokens};
    tile.qa = &qa;
    tile.unpacked_rows = keeps_unpacked_rows(format.type) ? unpacked.data() : nullptr;
    block_tile_vnni(tile);  // unpacks the rows
    tile.unpack_rows = false;
    const size_t calls = std::max<size_t>(1, 4'000'000'000 / (kSteps * cols));  // about 30 ms
    const double tile_s = bench::best_seconds(7, [&] {
      for (size_t i = 0; i < calls; ++i) block_tile_vnni(tile);
    });
    const double per_step = tile_s / double(calls) / double(kSteps * cols / 64) * 1e9;
    std::printf("%-6s %.3f ns per step = %.2fx the step's floor\n", std::string(format.name).c_str(), per_step, per_step / step_ns);
  }
}
#endif
