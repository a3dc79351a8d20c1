// The machine's arithmetic peak, measured in the same run as what is compared with it: a
// register-only loop of independent multiply-adds on every thread, f32 FMA (AVX-512 or
// AVX2) and, where the CPU has them, the bf16 dot product vdpbf16ps (64 flops per zmm)
// and the int8 dot product vpdpbusd (128 per zmm), which the block formats' tiles use.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <thread>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "base/cpu_features.h"

namespace larql::bench {

#if defined(__x86_64__)
template <typename Step>
inline double time_loop(size_t iterations, Step step) {
  const auto start = std::chrono::steady_clock::now();
  step(iterations);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The lanes' sum, only to keep the loop's result live (GCC 12's _mm512_reduce_add_ps
// reads an undefined register and warns).
__attribute__((target("avx512f"))) inline float sum_lanes(__m512 v) {
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, v);
  float sum = 0;
  for (float l : lanes) sum += l;
  return sum;
}

// 24 independent accumulators: enough to cover the instructions' latency on any core.
__attribute__((target("avx512f"), noinline)) inline float fma_loop_avx512(size_t iterations) {
  __m512 a[24];
  const __m512 m = _mm512_set1_ps(0.999f), c = _mm512_set1_ps(1e-3f);
#pragma GCC unroll 24
  for (int i = 0; i < 24; ++i) a[i] = _mm512_set1_ps(float(i));
  for (size_t it = 0; it < iterations; ++it)
#pragma GCC unroll 24
    for (int i = 0; i < 24; ++i) a[i] = _mm512_fmadd_ps(a[i], m, c);
  __m512 s = a[0];
  for (int i = 1; i < 24; ++i) s = _mm512_add_ps(s, a[i]);
  return sum_lanes(s);
}

__attribute__((target("avx2,fma"), noinline)) inline float fma_loop_avx2(size_t iterations) {
  __m256 a[12];
  const __m256 m = _mm256_set1_ps(0.999f), c = _mm256_set1_ps(1e-3f);
#pragma GCC unroll 12
  for (int i = 0; i < 12; ++i) a[i] = _mm256_set1_ps(float(i));
  for (size_t it = 0; it < iterations; ++it)
#pragma GCC unroll 24
    for (int i = 0; i < 12; ++i) a[i] = _mm256_fmadd_ps(a[i], m, c);
  __m256 s = a[0];
  for (int i = 1; i < 12; ++i) s = _mm256_add_ps(s, a[i]);
  alignas(32) float o[8];
  _mm256_store_ps(o, s);
  return o[0];
}

__attribute__((target("avx512f,avx512bf16"), noinline)) inline float dpbf16_loop(size_t iterations) {
  __m512 a[24];
  const __m512bh x = (__m512bh)_mm512_set1_epi16(0x3f80), y = (__m512bh)_mm512_set1_epi16(0x3a80);
#pragma GCC unroll 24
  for (int i = 0; i < 24; ++i) a[i] = _mm512_set1_ps(float(i));
  for (size_t it = 0; it < iterations; ++it)
#pragma GCC unroll 24
    for (int i = 0; i < 24; ++i) a[i] = _mm512_dpbf16_ps(a[i], x, y);
  __m512 s = a[0];
  for (int i = 1; i < 24; ++i) s = _mm512_add_ps(s, a[i]);
  return sum_lanes(s);
}

// Sixteen accumulators: on the Zen 5, 24 chains of vpdpbusd ran at less than half the
// rate of 16 (0.31 against 0.13 ns per instruction, one thread).
__attribute__((target("avx512f,avx512bw,avx512vnni"), noinline)) inline float dpbusd_loop(size_t iterations) {
  __m512i a[16];
  const __m512i x = _mm512_set1_epi8(3), y = _mm512_set1_epi8(-2);
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) a[i] = _mm512_set1_epi32(i);
  for (size_t it = 0; it < iterations; ++it)
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) a[i] = _mm512_dpbusd_epi32(a[i], x, y);
  __m512i s = a[0];
  for (int i = 1; i < 16; ++i) s = _mm512_add_epi32(s, a[i]);
  alignas(64) int32_t lanes[16];
  _mm512_store_si512(lanes, s);
  return float(lanes[0]);
}
#endif

struct Peaks {
  double f32_fma = 0;   // flop/s, all threads
  double bf16_dot = 0;  // flop/s, all threads; 0 without AVX512_BF16
  double int8_dot = 0;  // "flop/s" (two per multiply-add), all threads; 0 without AVX512_VNNI
};

enum class PeakKind { f32_fma, bf16_dot, int8_dot };

// One loop for about `seconds` on `threads` threads at once; 0 where the CPU lacks it.
inline double measure_peak(PeakKind kind, size_t threads, double seconds = 0.2) {
#if defined(__x86_64__)
  auto on_all = [&](auto loop, double flops_per_iteration) {
    const size_t probe = 1 << 16;
    const double probe_s = time_loop(probe, loop);
    const size_t iterations = std::max<size_t>(probe, size_t(double(probe) * seconds / std::max(probe_s, 1e-9)));
    std::vector<double> elapsed(threads);
    std::vector<std::thread> pool;
    for (size_t t = 0; t < threads; ++t) pool.emplace_back([&, t] { elapsed[t] = time_loop(iterations, loop); });
    for (auto& th : pool) th.join();
    return double(threads) * double(iterations) * flops_per_iteration / *std::max_element(elapsed.begin(), elapsed.end());
  };
  switch (kind) {
    case PeakKind::f32_fma:
      if (cpu_has_avx512f_bw()) return on_all([](size_t n) { volatile float s = fma_loop_avx512(n); (void)s; }, 24 * 16 * 2);
      if (cpu_has_avx2_fma_f16c()) return on_all([](size_t n) { volatile float s = fma_loop_avx2(n); (void)s; }, 12 * 8 * 2);
      return 0;
    case PeakKind::bf16_dot:
      if (cpu_has_avx512_bf16()) return on_all([](size_t n) { volatile float s = dpbf16_loop(n); (void)s; }, 24 * 32 * 2);
      return 0;
    case PeakKind::int8_dot:
      if (cpu_has_avx512f_bw() && cpu_has_avx512_vnni())
        return on_all([](size_t n) { volatile float s = dpbusd_loop(n); (void)s; }, 16 * 64 * 2);
      return 0;
  }
#else
  (void)kind, (void)threads, (void)seconds;
#endif
  return 0;
}

inline Peaks measure_peaks(size_t threads, double seconds = 0.2) {
  return {measure_peak(PeakKind::f32_fma, threads, seconds), measure_peak(PeakKind::bf16_dot, threads, seconds),
          measure_peak(PeakKind::int8_dot, threads, seconds)};
}

}  // namespace larql::bench
