#include "base/cpu_features.h"

#include <cstdlib>
#include <string_view>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace larql {

namespace {

bool masked(std::string_view feature) {
  const char* mask = std::getenv("LARQL_CPU_MASK");
  if (!mask) return false;
  std::string_view rest(mask);
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    if (rest.substr(0, comma) == feature) return true;
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
  }
  return false;
}

// AVX-512 F and BW as the CPU has them, whatever LARQL_CPU_MASK hides.
bool cpu_reports_avx512f_bw() {
#if defined(LARQL_EMULATE_AVX512)
  return false;
#elif defined(__x86_64__) || defined(__i386__)
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) return false;  // OSXSAVE
  unsigned xcr0_lo, xcr0_hi;
  __asm__("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  if ((xcr0_lo & 0xe6u) != 0xe6u) return false;  // XMM, YMM, opmask, ZMM state
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  return (b & (1u << 16)) && (b & (1u << 30));  // AVX512F, AVX512BW
#else
  return false;
#endif
}

}  // namespace

bool cpu_has_avx2_fma_f16c() {
  if (masked("avx2")) return false;
#if defined(__x86_64__) || defined(__i386__)
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
  const bool fma = c & (1u << 12), osxsave = c & (1u << 27), avx = c & (1u << 28), f16c = c & (1u << 29);
  if (!(fma && osxsave && avx && f16c)) return false;
  unsigned xcr0_lo, xcr0_hi;
  __asm__("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  if ((xcr0_lo & 0x6u) != 0x6u) return false;  // XMM and YMM state enabled by the OS
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  return b & (1u << 5);  // AVX2
#else
  return false;
#endif
}

bool cpu_has_avx_vnni() {
  if (masked("avxvnni") || !cpu_has_avx2_fma_f16c()) return false;
#if defined(__x86_64__) || defined(__i386__)
  unsigned a, b, c, d;
  if (!__get_cpuid_count(7, 1, &a, &b, &c, &d)) return false;
  return a & (1u << 4);  // AVX-VNNI
#else
  return false;
#endif
}

bool cpu_has_avx512f_bw() {
  if (masked("avx512") || masked("avx2")) return false;
#if defined(LARQL_EMULATE_AVX512)
  return cpu_has_avx2_fma_f16c();  // the tests' emulated build: SIMDe on AVX2 (simd_avx512.h)
#else
  return cpu_reports_avx512f_bw();
#endif
}

bool cpu_has_avx512_vnni() {
  if (masked("avx512vnni") || !cpu_has_avx512f_bw()) return false;
#if defined(LARQL_EMULATE_AVX512)
  return true;
#elif defined(__x86_64__) || defined(__i386__)
  unsigned a, b, c, d;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  return (c & (1u << 11)) && (b & (1u << 31));  // AVX512_VNNI, AVX512VL
#else
  return false;
#endif
}

bool cpu_has_avx512_bf16() {
  if (masked("avx512bf16") || !cpu_has_avx512f_bw()) return false;
#if defined(LARQL_EMULATE_AVX512)
  return true;
#elif defined(__x86_64__) || defined(__i386__)
  unsigned a, b, c, d;
  if (!__get_cpuid_count(7, 1, &a, &b, &c, &d)) return false;
  return a & (1u << 5);  // AVX512_BF16
#else
  return false;
#endif
}

bool cpu_prefers_one_row_q8_0_decode() {
  if (const char* choice = std::getenv("LARQL_BLOCK_DECODE"); choice && *choice)
    return std::string_view(choice) == "256";
  if (masked("avx2") || !cpu_reports_avx512f_bw()) return false;  // (a mask of AVX-512 alone leaves Zen 4's memory)
#if (defined(__x86_64__) || defined(__i386__)) && !defined(LARQL_EMULATE_AVX512)
  unsigned a, b, c, d;
  if (!__get_cpuid(0, &a, &b, &c, &d)) return false;
  const bool amd = b == 0x68747541 && d == 0x69746e65 && c == 0x444d4163;  // "AuthenticAMD"
  if (!amd || !__get_cpuid(1, &a, &b, &c, &d)) return false;
  const unsigned family = ((a >> 8) & 0xf) + ((a >> 20) & 0xff);
  return family == 0x19;  // Zen 3 and Zen 4; of them only Zen 4 has AVX-512
#else
  return false;
#endif
}

}  // namespace larql
