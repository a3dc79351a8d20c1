// The portable transcendentals against long double rounded once: their f32 roundings are the
// correctly rounded ones (none of the values drawn lies within their error of a midpoint),
// and their doubles within a few ulps. What RoPE, softcaps and GELU compute with them.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "kernels/ops.h"
#include "kernels/portable_math.h"

namespace larql {
namespace {

// |a − b| in units of b's double ulp.
double ulps(double a, long double b) {
  const double bd = double(b);
  return double(std::fabs((long double)a - b)) / std::max(std::nextafter(std::fabs(bd), INFINITY) - std::fabs(bd), 1e-300);
}

TEST(PortableMath, SinesAndCosinesOfRopeAnglesRoundAsLongDoubleDoes) {
  std::mt19937_64 rng(1);
  size_t checked = 0;
  for (int i = 0; i < 200000; ++i) {
    // A position times a frequency, as RoPE forms them in f32: small and large angles.
    const float position = float(rng() % 131072), frequency = std::ldexp(float(rng() % 1000000) / 1e6f, -int(rng() % 20));
    const float angle = i % 7 == 0 ? float(rng() % 100000) * 1e-6f : position * frequency;
    double s, c;
    portable_sincos(angle, s, c);
    const long double exact_s = sinl((long double)angle), exact_c = cosl((long double)angle);
    ASSERT_EQ(float(s), float(exact_s)) << "sin " << angle;
    ASSERT_EQ(float(c), float(exact_c)) << "cos " << angle;
    ASSERT_LT(std::fabs(s - double(exact_s)), 4e-16 + 1e-16 * std::fabs(double(exact_s))) << angle;
    ++checked;
  }
  EXPECT_EQ(checked, 200000u);
}

TEST(PortableMath, PowLogAndExpAreWithinAFewUlpsAndRoundToF32Exactly) {
  std::mt19937_64 rng(2);
  for (int i = 0; i < 100000; ++i) {
    // RoPE's theta^(2i/d): thetas from 1e4 to 1e7, exponents in [0, 1); and a wider spread.
    const double theta = i % 2 ? std::pow(10.0, 4 + double(rng() % 3000) / 1000) : double(rng() % 1000000 + 1) / 997.0;
    const double e = double(rng() % 4096) / 4096.0 - (i % 3 == 0 ? 0.5 : 0);
    const long double exact = powl((long double)theta, (long double)e);
    const double got = portable_pow(theta, e);
    ASSERT_LT(ulps(got, exact), 64) << theta << "^" << e;  // the exponent times ln base carries log's error up
    ASSERT_EQ(float(got), float(exact)) << theta << "^" << e;
    ASSERT_LT(ulps(portable_log(theta), logl((long double)theta)), 4) << "log " << theta;
    const double x = (double(rng() % 2000000) / 1000.0 - 1000.0) * 0.6;
    ASSERT_LT(ulps(portable_exp(x), expl((long double)x)), 4) << "exp " << x;
  }
  EXPECT_EQ(float(portable_pow(2.0, -0.5)), float(std::sqrt(0.5)));  // what Gemma's scales take, in f32
  EXPECT_EQ(portable_log(1.0), 0.0);
}

TEST(PortableMath, SoftcapAndGeluTanhAreTheirFormulasToAFewF32Ulps) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> value(-60, 60);
  std::vector<float> x(5000), capped(5000);
  for (float& v : x) v = value(rng);
  x[0] = 0, x[1] = -0.0f, x[2] = 1e-6f, x[3] = 500, x[4] = -500;
  capped = x;
  softcap(capped.data(), capped.size(), 30.0f);
  for (size_t i = 0; i < x.size(); ++i) {
    const double exact = 30.0 * std::tanh(double(x[i]) / 30.0);
    EXPECT_NEAR(capped[i], exact, 30 * 2e-7 + 4e-7 * std::fabs(exact)) << x[i];
  }
  EXPECT_EQ(std::signbit(capped[1]), true);
  std::vector<float> gate(x.begin(), x.end()), up(x.size(), 1.0f);
  for (float& g : gate) g /= 10;
  gated_activation(gate.data(), up.data(), gate.size(), Activation::gelu_tanh, 0);
  for (size_t i = 0; i < x.size(); ++i) {
    const double g = double(x[i]) / 10, z = 0.7978845608028654 * (g + 0.044715 * g * g * g);
    const double exact = 0.5 * g * (1 + std::tanh(z));
    EXPECT_NEAR(gate[i], exact, 1e-6 * std::max(1.0, std::fabs(exact))) << g;
  }
}

}  // namespace
}  // namespace larql
