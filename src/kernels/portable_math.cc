#include "kernels/portable_math.h"

#include <cmath>
#include <cstdint>
#include <cstring>

namespace larql {
namespace {

// ln 2 in two parts: k · kLn2Hi is exact for |k| < 2^11.
constexpr double kLn2Hi = 6.93147180369123816490e-01, kLn2Lo = 1.90821492927058770002e-10;
constexpr double kInvLn2 = 1.44269504088896338700e+00;
// π/2 in parts (fdlibm's): the first two of 33 bits, k · each exact for |k| < 2^20.
constexpr double kPio2_1 = 1.57079632673412561417e+00, kPio2_2 = 6.07710050630396597660e-11,
                 kPio2_3 = 2.02226624879595063154e-21;  // the last: π/2 less the first two
constexpr double kTwoOverPi = 6.36619772367581382433e-01;

// Rounds to the nearest integer, ties to even, by the 2^52 + 2^51 trick (no library call,
// no dependence on the rounding instruction a compiler picks).
double round_nearest(double x) {
  constexpr double kShift = 6755399441055744.0;  // 1.5 · 2^52
  return (x + kShift) - kShift;
}

// x · 2^k for the k of an exponent (|k| < 1023), by the bits.
double scale_by_power_of_two(double x, int k) {
  const uint64_t bits = uint64_t(int64_t(k) + 1023) << 52;
  double factor;
  std::memcpy(&factor, &bits, sizeof factor);
  return x * factor;
}

}  // namespace

double portable_exp(double x) {
  const double k = round_nearest(x * kInvLn2);
  const double r = (x - k * kLn2Hi) - k * kLn2Lo;  // |r| ≤ 0.35
  // Σ_{i ≤ 17} r^i / i!, Horner's rule from i = 17 (the remainder is below 2^-60 of the sum).
  double p = 1.0 / 355687428096000.0;  // 1/17!
  static constexpr double kInverseFactorials[] = {1.0 / 20922789888000.0, 1.0 / 1307674368000.0, 1.0 / 87178291200.0,
                                                  1.0 / 6227020800.0,     1.0 / 479001600.0,     1.0 / 39916800.0,
                                                  1.0 / 3628800.0,        1.0 / 362880.0,        1.0 / 40320.0,
                                                  1.0 / 5040.0,           1.0 / 720.0,           1.0 / 120.0,
                                                  1.0 / 24.0,             1.0 / 6.0,             1.0 / 2.0,
                                                  1.0,                    1.0};
  for (double c : kInverseFactorials) p = p * r + c;
  // Two steps of scaling keep 2^k representable for |k| up to 1022 + 1022.
  const int ki = int(k);
  return scale_by_power_of_two(scale_by_power_of_two(p, ki / 2), ki - ki / 2);
}

double portable_log(double x) {
  // x = m · 2^e with m in [√½, √2); ln m = 2 atanh(s), s = (m − 1)/(m + 1), |s| ≤ 0.1716.
  int e = 0;
  double m = std::frexp(x, &e);  // exact: m in [½, 1)
  if (m < 0.70710678118654752440) m *= 2, --e;
  const double s = (m - 1) / (m + 1), s2 = s * s;
  // 2 Σ_{j ≤ 13} s^(2j+1) / (2j+1), Horner's rule in s² (the remainder is below 2^-60).
  double p = 1.0 / 27;
  for (int j = 12; j >= 0; --j) p = p * s2 + 1.0 / double(2 * j + 1);
  const double log_m = 2 * s * p;
  return (double(e) * kLn2Hi + log_m) + double(e) * kLn2Lo;
}

double portable_pow(double base, double exponent) { return portable_exp(exponent * portable_log(base)); }

void portable_sincos(double x, double& sine, double& cosine) {
  // x = k · π/2 + r, |r| ≤ π/4 (Cody and Waite's reduction in three parts).
  const double k = round_nearest(x * kTwoOverPi);
  const double r = ((x - k * kPio2_1) - k * kPio2_2) - k * kPio2_3;
  const double r2 = r * r;
  // sin r = r Σ (−1)^j r^(2j) / (2j+1)!, cos r = Σ (−1)^j r^(2j) / (2j)!, j ≤ 10 (remainders
  // below 2^-70 at |r| = π/4), Horner's rule in r².
  struct Coefficients {
    double sin[11], cos[11];
    Coefficients() {
      double s = 1, c = 1;
      for (int j = 0; j <= 10; ++j) {
        sin[j] = s, cos[j] = c;
        s = -s / double((2 * j + 2) * (2 * j + 3));
        c = -c / double((2 * j + 1) * (2 * j + 2));
      }
    }
  };
  static const Coefficients kCoefficients;
  double s = 0, c = 0;
  for (int j = 10; j >= 0; --j) s = s * r2 + kCoefficients.sin[j], c = c * r2 + kCoefficients.cos[j];
  s *= r;
  // The quadrant.
  const int64_t q = int64_t(k) & 3;
  if (q == 0) sine = s, cosine = c;
  else if (q == 1) sine = c, cosine = -s;
  else if (q == 2) sine = -s, cosine = -c;
  else sine = -c, cosine = s;
}

}  // namespace larql
