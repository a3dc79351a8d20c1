#include "kernels/exp.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include "base/simd_avx512.h"
#endif

// The loops over side-by-side vectors unrolled, so that they stay in registers; not in the
// SIMDe-emulated test build (as matvec_tiles.h's LARQL_UNROLL_TILE).
#if defined(LARQL_EMULATE_AVX512)
#define LARQL_UNROLL_EXP
#else
#define LARQL_UNROLL_EXP _Pragma("GCC unroll 8")
#endif

namespace larql {
namespace {

constexpr double kInvLn2 = 0x1.71547652b82fep+0;
constexpr double kLn2Hi = 0x1.62e42fefa39efp-1, kLn2Lo = 0x1.abc9e3b39803fp-56;  // ln 2 = hi + lo
// Added to y with |y| < 2^51, it leaves y rounded to an integer in the low bits.
constexpr double kShifter = 0x1.8p52;
constexpr double kLowest = -150.0, kHighest = 100.0;
// 1 / i!, from i = 13 down to 0.
constexpr double kTaylor[14] = {0x1.6124613a86d09p-33, 0x1.1eed8eff8d898p-29, 0x1.ae64567f544e4p-26, 0x1.27e4fb7789f5cp-22,
                                0x1.71de3a556c734p-19, 0x1.a01a01a01a01ap-16, 0x1.a01a01a01a01ap-13, 0x1.6c16c16c16c17p-10,
                                0x1.1111111111111p-7,  0x1.5555555555555p-5,  0x1.5555555555555p-3,  0x1.0000000000000p-1,
                                0x1.0000000000000p+0,  0x1.0000000000000p+0};

// Vectors computed side by side (exp4_avx2, exp8_avx512), the fastest counts measured on
// the Zen 5 (docs/benchmarks/history.md); more would not fit the registers.
constexpr int kAvx2Chains = 4, kAvx512Chains = 8;

int64_t bits_of(double d) {
  int64_t b;
  std::memcpy(&b, &d, sizeof b);
  return b;
}

}  // namespace

float exp_f32(float xf) {
  if (std::isnan(xf)) return xf;
  const double x = std::min(std::max(double(xf), kLowest), kHighest);
  const double t = std::fma(x, kInvLn2, kShifter);
  const double k = t - kShifter;
  double r = std::fma(-k, kLn2Hi, x);
  r = std::fma(-k, kLn2Lo, r);
  double p = kTaylor[0];
  for (int i = 1; i < 14; ++i) p = std::fma(p, r, kTaylor[i]);
  const uint64_t scale_bits = uint64_t(bits_of(t) - bits_of(kShifter) + 1023) << 52;  // 2^k
  double scale;
  std::memcpy(&scale, &scale_bits, sizeof scale);
  return float(p * scale);
}

namespace {

void exp_scalar(float* x, size_t n, float shift) {
  for (size_t i = 0; i < n; ++i) x[i] = exp_f32(x[i] - shift);
}

#if defined(__x86_64__)
// Four lanes of exp_f32 in doubles, for N vectors side by side (as exp8_avx512 below).
template <int N>
__attribute__((target("avx2,fma"))) inline void exp4_avx2(const float* in, float* out, __m128 shift) {
  const __m256d shifter = _mm256_set1_pd(kShifter);
  __m128 xf[N];
  __m256d t[N], r[N], p[N];
  LARQL_UNROLL_EXP for (int v = 0; v < N; ++v) {
    xf[v] = _mm_sub_ps(_mm_loadu_ps(in + 4 * v), shift);
    const __m256d x = _mm256_min_pd(_mm256_max_pd(_mm256_cvtps_pd(xf[v]), _mm256_set1_pd(kLowest)), _mm256_set1_pd(kHighest));
    t[v] = _mm256_fmadd_pd(x, _mm256_set1_pd(kInvLn2), shifter);
    const __m256d k = _mm256_sub_pd(t[v], shifter);
    r[v] = _mm256_fnmadd_pd(k, _mm256_set1_pd(kLn2Lo), _mm256_fnmadd_pd(k, _mm256_set1_pd(kLn2Hi), x));
    p[v] = _mm256_set1_pd(kTaylor[0]);
  }
  for (int i = 1; i < 14; ++i)
    LARQL_UNROLL_EXP for (int v = 0; v < N; ++v) p[v] = _mm256_fmadd_pd(p[v], r[v], _mm256_set1_pd(kTaylor[i]));
  LARQL_UNROLL_EXP for (int v = 0; v < N; ++v) {
    const __m256i power = _mm256_add_epi64(_mm256_sub_epi64(_mm256_castpd_si256(t[v]), _mm256_castpd_si256(shifter)), _mm256_set1_epi64x(1023));
    const __m128 e = _mm256_cvtpd_ps(_mm256_mul_pd(p[v], _mm256_castsi256_pd(_mm256_slli_epi64(power, 52))));
    _mm_storeu_ps(out + 4 * v, _mm_blendv_ps(e, xf[v], _mm_cmpunord_ps(xf[v], xf[v])));  // NaN stays NaN
  }
}

__attribute__((target("avx2,fma"))) void exp_avx2(float* x, size_t n, float shift_by) {
  const __m128 shift = _mm_set1_ps(shift_by);
  size_t i = 0;
  for (; i + 4 * kAvx2Chains <= n; i += 4 * kAvx2Chains) exp4_avx2<kAvx2Chains>(x + i, x + i, shift);
  for (; i + 4 <= n; i += 4) exp4_avx2<1>(x + i, x + i, shift);
  if (i < n) {
    alignas(16) float tail[4] = {};
    std::copy(x + i, x + n, tail);
    exp4_avx2<1>(tail, tail, shift);
    std::copy(tail, tail + (n - i), x + i);
  }
}

// f32 to f64 and back on eight lanes. SIMDe has no AVX-512 conversions: the emulated build
// converts halves.
LARQL_AVX512_TARGET("avx512f") inline __m512d widen8(__m256 x) {
#if defined(LARQL_EMULATE_AVX512)
  return _mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_cvtps_pd(_mm256_castps256_ps128(x))), _mm256_cvtps_pd(_mm256_extractf128_ps(x, 1)), 1);
#else
  return _mm512_cvtps_pd(x);
#endif
}

LARQL_AVX512_TARGET("avx512f") inline __m256 narrow8(__m512d x) {
#if defined(LARQL_EMULATE_AVX512)
  return _mm256_set_m128(_mm256_cvtpd_ps(_mm512_extractf64x4_pd(x, 1)), _mm256_cvtpd_ps(_mm512_castpd512_pd256(x)));
#else
  return _mm512_cvtpd_ps(x);
#endif
}

// Eight lanes of exp_f32 in doubles, for N vectors side by side: Horner's rule is a chain
// of thirteen dependent multiply-adds, and N independent chains keep the FMA units busy
// where one leaves them waiting on its latency. Each lane's operations are the same.
template <int N>
LARQL_AVX512_TARGET("avx512f") inline void exp8_avx512(const float* in, float* out, __m256 shift) {
  const __m512d shifter = _mm512_set1_pd(kShifter);
  __m256 xf[N];
  __m512d t[N], r[N], p[N];
  LARQL_UNROLL_EXP for (int v = 0; v < N; ++v) {
    xf[v] = _mm256_sub_ps(_mm256_loadu_ps(in + 8 * v), shift);
    const __m512d x = _mm512_min_pd(_mm512_max_pd(widen8(xf[v]), _mm512_set1_pd(kLowest)), _mm512_set1_pd(kHighest));
    t[v] = _mm512_fmadd_pd(x, _mm512_set1_pd(kInvLn2), shifter);
    const __m512d k = _mm512_sub_pd(t[v], shifter);
    r[v] = _mm512_fnmadd_pd(k, _mm512_set1_pd(kLn2Lo), _mm512_fnmadd_pd(k, _mm512_set1_pd(kLn2Hi), x));
    p[v] = _mm512_set1_pd(kTaylor[0]);
  }
  for (int i = 1; i < 14; ++i)
    LARQL_UNROLL_EXP for (int v = 0; v < N; ++v) p[v] = _mm512_fmadd_pd(p[v], r[v], _mm512_set1_pd(kTaylor[i]));
  LARQL_UNROLL_EXP for (int v = 0; v < N; ++v) {
    const __m512i power = _mm512_add_epi64(_mm512_sub_epi64(_mm512_castpd_si512(t[v]), _mm512_castpd_si512(shifter)), _mm512_set1_epi64(1023));
    const __m256 e = narrow8(_mm512_mul_pd(p[v], _mm512_castsi512_pd(_mm512_slli_epi64(power, 52))));
    _mm256_storeu_ps(out + 8 * v, _mm256_blendv_ps(e, xf[v], _mm256_cmp_ps(xf[v], xf[v], _CMP_UNORD_Q)));  // NaN stays NaN
  }
}

LARQL_AVX512_TARGET("avx512f") void exp_avx512(float* x, size_t n, float shift_by) {
  const __m256 shift = _mm256_set1_ps(shift_by);
  size_t i = 0;
  for (; i + 8 * kAvx512Chains <= n; i += 8 * kAvx512Chains) exp8_avx512<kAvx512Chains>(x + i, x + i, shift);
  for (; i + 8 <= n; i += 8) exp8_avx512<1>(x + i, x + i, shift);
  if (i < n) {
    alignas(32) float tail[8] = {};
    std::copy(x + i, x + n, tail);
    exp8_avx512<1>(tail, tail, shift);
    std::copy(tail, tail + (n - i), x + i);
  }
}
#endif

}  // namespace

void exp_shifted_in_place_with(MatmulIsa isa, float* x, size_t n, float shift) {
  switch (isa) {
    case MatmulIsa::scalar: return exp_scalar(x, n, shift);
#if defined(__x86_64__)
    case MatmulIsa::avx2: return exp_avx2(x, n, shift);
    case MatmulIsa::avx512:
    case MatmulIsa::avx512bf16: return exp_avx512(x, n, shift);
#else
    default: return exp_scalar(x, n, shift);
#endif
  }
}

void exp_shifted_in_place(float* x, size_t n, float shift) {
  static const MatmulIsa isa = best_matmul_isa();
  exp_shifted_in_place_with(isa, x, n, shift);
}

// x − 0 is x, NaNs included (they stay NaN).
void exp_in_place_with(MatmulIsa isa, float* x, size_t n) { exp_shifted_in_place_with(isa, x, n, 0.0f); }

void exp_in_place(float* x, size_t n) { exp_shifted_in_place(x, n, 0.0f); }

}  // namespace larql
