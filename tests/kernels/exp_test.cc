// exp_in_place (kernels/exp.h): every ISA gives the scalar version's bits, and those are
// e^x correctly rounded (against expl) on a sample and at the edges of the f32 range.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "base/cpu_features.h"
#include "kernels/exp.h"

namespace larql {
namespace {

uint32_t bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

std::vector<float> sample() {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> xs{0.0f, -0.0f, 1.0f, -1.0f, 1e-30f, -1e-30f, 1e-45f, 0.5f, 88.72283f, 88.72284f, 88.7229f, 89.0f, 100.0f,
                        1e30f, -87.33654f, -87.34f, -100.0f, -103.97f, -103.98f, -104.0f, -150.0f, -1e30f, inf, -inf,
                        std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::denorm_min()};
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> wide(-110.0f, 95.0f), near_zero(-2.0f, 2.0f);
  for (int i = 0; i < 50000; ++i) xs.push_back(wide(rng)), xs.push_back(near_zero(rng));
  xs.push_back(0.25f);  // an odd count: the SIMD versions' tails
  return xs;
}

TEST(Exp, EveryIsaGivesTheScalarBits) {
  const std::vector<float> xs = sample();
  std::vector<float> expected = xs;
  exp_in_place_with(MatmulIsa::scalar, expected.data(), expected.size());
  std::vector<MatmulIsa> isas;
  for (MatmulIsa isa : {MatmulIsa::avx2, MatmulIsa::avx512})
    if (isa <= best_matmul_isa()) isas.push_back(isa);
    else std::printf("NOT CHECKED on this CPU: the exp of ISA %d\n", int(isa));
  for (MatmulIsa isa : isas)
    // Lengths that end in each loop of the SIMD versions: side-by-side vectors (16 values
    // for AVX2, 64 for AVX-512), single vectors, the tail.
    for (size_t n : {xs.size(), size_t(1), size_t(3), size_t(7), size_t(9), size_t(17), size_t(19), size_t(75)}) {
      std::vector<float> got(xs.begin(), xs.begin() + n);
      exp_in_place_with(isa, got.data(), n);
      for (size_t i = 0; i < n; ++i)
        ASSERT_EQ(bits(got[i]), bits(expected[i])) << "isa " << int(isa) << " x " << xs[i] << " n " << n;
    }
  std::vector<float> dispatched = xs;
  exp_in_place(dispatched.data(), dispatched.size());
  for (size_t i = 0; i < xs.size(); ++i) ASSERT_EQ(bits(dispatched[i]), bits(expected[i])) << xs[i];
}

// The shifted form is e^(x − shift) with the difference rounded to f32 first, on every ISA,
// including shifts that make infinities, NaNs and overflowing differences.
TEST(Exp, ShiftedIsTheExpOfTheRoundedDifferenceOnEveryIsa) {
  const std::vector<float> xs = sample();
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<MatmulIsa> isas{MatmulIsa::scalar};
  for (MatmulIsa isa : {MatmulIsa::avx2, MatmulIsa::avx512})
    if (isa <= best_matmul_isa()) isas.push_back(isa);
  for (float shift : {0.0f, 0.75f, -3.25f, 3e38f, -3e38f, inf, -inf, std::numeric_limits<float>::quiet_NaN()})
    for (MatmulIsa isa : isas)
      for (size_t n : {xs.size(), size_t(1), size_t(9), size_t(75)}) {
        std::vector<float> got(xs.begin(), xs.begin() + n);
        exp_shifted_in_place_with(isa, got.data(), n, shift);
        for (size_t i = 0; i < n; ++i) {
          const float difference = xs[i] - shift;
          ASSERT_EQ(bits(got[i]), bits(exp_f32(difference))) << "isa " << int(isa) << " x " << xs[i] << " shift " << shift;
        }
      }
}

TEST(Exp, IsCorrectlyRoundedOnTheSampleAndAtTheEdges) {
  for (float x : sample()) {
    const float got = exp_f32(x);
    if (std::isnan(x)) {
      EXPECT_TRUE(std::isnan(got));
      continue;
    }
    const long double exact = expl((long double)x);
    // expl decides the rounding except within 2^-58 of a midpoint (none in this sample).
    EXPECT_EQ(bits(got), bits(float(exact))) << "x " << x;
  }
  EXPECT_EQ(exp_f32(0.0f), 1.0f);
  EXPECT_EQ(exp_f32(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_EQ(exp_f32(89.0f), std::numeric_limits<float>::infinity());
  EXPECT_GT(exp_f32(-103.0f), 0.0f);  // a subnormal result
  EXPECT_LT(exp_f32(-103.0f), std::numeric_limits<float>::min());
}

}  // namespace
}  // namespace larql
