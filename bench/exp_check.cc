// Every f32 x whose e^x is neither 0 nor inf in f32 (-104 ≤ x ≤ 89), through exp_in_place
// (kernels/exp.h), against expl (x87 long double, 64-bit significand) rounded to f32.
// Counts the values that are not correctly rounded, the ones too near a midpoint for expl to
// decide, and, for comparison, glibc's expf's misroundings in the same run.
//
//   build/bench/exp_check [--threads 2]
#include <CLI/CLI.hpp>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "kernels/exp.h"

namespace {

struct Counts {
  std::atomic<uint64_t> values{0}, ours_wrong{0}, undecided{0}, libc_wrong{0};
};

float from_bits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
}

// Whether `got` is e^x correctly rounded, by expl; `undecided` when expl's value is too near
// the midpoint between got and the float it rounds to.
bool correctly_rounded(float x, float got, bool& undecided) {
  const long double exact = expl((long double)x);
  const float reference = float(exact);
  if (got == reference) return true;
  const long double midpoint = ((long double)got + (long double)reference) / 2;
  undecided = fabsl(exact - midpoint) <= fabsl(exact) * 0x1p-58L;
  return false;
}

void check_range(uint32_t first, uint32_t last, Counts& counts) {  // bit patterns [first, last]
  constexpr size_t kBlock = 4096;
  std::vector<float> xs(kBlock), es(kBlock);
  for (uint64_t b = first; b <= last; b += kBlock) {
    const size_t n = size_t(std::min<uint64_t>(kBlock, last - b + 1));
    for (size_t i = 0; i < n; ++i) xs[i] = from_bits(uint32_t(b + i));
    std::copy(xs.begin(), xs.begin() + n, es.begin());
    larql::exp_in_place(es.data(), n);
    uint64_t wrong = 0, undecided = 0, libc_wrong = 0;
    for (size_t i = 0; i < n; ++i) {
      bool near = false;
      if (!correctly_rounded(xs[i], es[i], near)) (near ? undecided : wrong) += 1;
      bool libc_near = false;
      if (!correctly_rounded(xs[i], expf(xs[i]), libc_near) && !libc_near) ++libc_wrong;
    }
    counts.values += n, counts.ours_wrong += wrong, counts.undecided += undecided, counts.libc_wrong += libc_wrong;
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"larql exp check: exp_in_place against expl on every f32 that matters"};
  size_t threads = 2;
  app.add_option("--threads", threads);
  CLI11_PARSE(app, argc, argv);
  uint32_t zero = 0, top, bottom;
  const float hi = 89.0f, lo = -104.0f;
  std::memcpy(&top, &hi, 4);
  std::memcpy(&bottom, &lo, 4);
  // Ranges of bit patterns: [+0, 89] and [-0, -104], split between the threads.
  std::vector<std::pair<uint32_t, uint32_t>> ranges{{zero, top}, {0x80000000u, bottom}};
  Counts counts;
  std::vector<std::thread> pool;
  for (auto [first, last] : ranges) {
    const uint32_t step = (last - first) / uint32_t(threads) + 1;
    for (size_t t = 0; t < threads; ++t) {
      const uint64_t a = first + uint64_t(t) * step, b = std::min<uint64_t>(last, a + step - 1);
      if (a <= b) pool.emplace_back(check_range, uint32_t(a), uint32_t(b), std::ref(counts));
    }
  }
  for (auto& th : pool) th.join();
  std::printf("%llu values in [-104, 89]: exp_in_place not correctly rounded %llu, too near a midpoint for expl %llu; "
              "glibc expf not correctly rounded %llu\n",
              (unsigned long long)counts.values, (unsigned long long)counts.ours_wrong, (unsigned long long)counts.undecided,
              (unsigned long long)counts.libc_wrong);
  return counts.ours_wrong == 0 ? 0 : 1;
}
