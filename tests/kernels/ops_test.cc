#include "kernels/ops.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "kernels/exp.h"
#include "support/float_bits.h"

namespace larql {
namespace {

using test::same_bits_or_both_nan;

// softmax's definition (ops.h), one value after another.
void softmax_in_order(float* x, size_t n) {
  const float max = *std::max_element(x, x + n);
  for (size_t i = 0; i < n; ++i) x[i] -= max;
  exp_in_place(x, n);
  float sum = 0;
  for (size_t i = 0; i < n; ++i) sum += x[i];
  for (size_t i = 0; i < n; ++i) x[i] /= sum;
}

// Scores as attention makes them, now and then a zero of either sign, an infinity or a NaN.
float score(std::mt19937& rng, bool edgy) {
  std::normal_distribution<float> normal(0, 4);
  if (edgy) switch (rng() % 16) {
      case 0: return 0.0f;
      case 1: return -0.0f;
      case 2: return -std::numeric_limits<float>::infinity();
      case 3: return std::numeric_limits<float>::infinity();
      case 4: return std::numeric_limits<float>::quiet_NaN();
      default: break;
    }
  return normal(rng);
}

TEST(Softmax, RowsSideBySideGiveEachRowsBitsInOrder) {
  std::mt19937 rng(7);
  size_t checked = 0;
  for (bool edgy : {false, true})
    for (size_t rows : {1u, 2u, 3u, 4u, 5u, 8u, 9u})
      for (size_t n : {1u, 2u, 15u, 16u, 17u, 33u, 100u, 1000u}) {
        const size_t stride = n + rng() % 3;
        std::vector<float> x(rows * stride);
        for (float& v : x) v = score(rng, edgy && rng() % 8 == 0);
        std::vector<float> expected = x;
        for (size_t r = 0; r < rows; ++r) softmax_in_order(&expected[r * stride], n);
        softmax_rows(x.data(), rows, stride, n);
        for (size_t r = 0; r < rows; ++r)
          for (size_t i = 0; i < n; ++i, ++checked)
            ASSERT_TRUE(same_bits_or_both_nan(x[r * stride + i], expected[r * stride + i]))
                << "rows " << rows << " n " << n << " row " << r << " value " << i << " edgy " << edgy;
      }
  EXPECT_GT(checked, 10000u);
}

// SiLU's gating (ops.h): gate / (1 + e^-gate) · up, value by value, whatever ISA runs it;
// lengths ending inside and on the edges of the vectors and of its blocks of 256.
TEST(GatedActivation, SiluIsItsDefinitionValueByValue) {
  std::mt19937 rng(3);
  size_t checked = 0;
  for (size_t n : {1u, 15u, 16u, 17u, 255u, 256u, 257u, 1000u}) {
    std::vector<float> gate(n), up(n);
    for (size_t i = 0; i < n; ++i) gate[i] = score(rng, rng() % 8 == 0), up[i] = score(rng, rng() % 8 == 0);
    std::vector<float> expected(n);
    for (size_t i = 0; i < n; ++i) expected[i] = gate[i] / (1.0f + exp_f32(-gate[i])) * up[i];
    gated_activation(gate.data(), up.data(), n, Activation::silu);
    for (size_t i = 0; i < n; ++i, ++checked)
      ASSERT_TRUE(same_bits_or_both_nan(gate[i], expected[i])) << "n " << n << " value " << i;
  }
  EXPECT_GT(checked, 1500u);
}

// rmsnorm's definition (ops.h), one value after another.
void rmsnorm_in_order(float* out, const float* x, const std::vector<float>& weight, size_t n, float eps, float offset) {
  float ss = 0;
  for (size_t i = 0; i < n; ++i) ss += x[i] * x[i];
  ss = ss / static_cast<float>(n) + eps;
  const float inv = 1.0f / std::sqrt(ss);
  for (size_t i = 0; i < n; ++i) out[i] = weight.empty() ? inv * x[i] : (offset + weight[i]) * (inv * x[i]);
}

TEST(RmsNorm, RowsSideBySideGiveEachRowsBitsInOrder) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0, 3);
  size_t checked = 0;
  for (DType weight_type : {DType::f32, DType::bf16})
    for (bool weighted : {false, true})
      for (float offset : {0.0f, 1.0f})
        for (size_t rows : {1u, 3u, 4u, 7u, 8u})
          for (size_t n : {1u, 5u, 64u, 100u, 2048u}) {
            std::vector<float> x(rows * n), weight;
            std::vector<uint16_t> weight_bf16;
            for (float& v : x) v = normal(rng);
            if (weighted) {
              weight.resize(n);
              for (float& v : weight) v = normal(rng);
              if (weight_type == DType::bf16)  // stored as bf16: the reference takes the stored values
                for (float& v : weight) weight_bf16.push_back(f32_to_bf16(v)), v = bf16_to_f32(weight_bf16.back());
            }
            const void* stored = weight_type == DType::bf16 ? static_cast<const void*>(weight_bf16.data()) : weight.data();
            const Matrix w = weighted ? Matrix{weight_type, 1, n, stored} : Matrix{};
            std::vector<float> expected(rows * n), out(rows * n), in_place = x;
            for (size_t r = 0; r < rows; ++r) rmsnorm_in_order(&expected[r * n], &x[r * n], weight, n, 1e-5f, offset);
            rmsnorm_rows(out.data(), x.data(), rows, w, n, 1e-5f, offset);
            rmsnorm_rows(in_place.data(), in_place.data(), rows, w, n, 1e-5f, offset);
            for (size_t i = 0; i < rows * n; ++i, ++checked) {
              ASSERT_EQ(std::bit_cast<uint32_t>(out[i]), std::bit_cast<uint32_t>(expected[i]))
                  << "rows " << rows << " n " << n << " value " << i << " weighted " << weighted << " bf16 "
                  << (weight_type == DType::bf16);
              ASSERT_EQ(std::bit_cast<uint32_t>(in_place[i]), std::bit_cast<uint32_t>(expected[i])) << "in place, value " << i;
            }
          }
  EXPECT_GT(checked, 10000u);
}

// Against long double: rows of a vocabulary's size (blocks and a ragged tail), wide and
// narrow spreads, with masked (−inf) entries; and the edge cases.
TEST(LogSumExp, WithinAMillionthOfTheExactValue) {
  std::mt19937 rng(5);
  for (size_t n : {size_t(1), size_t(7), size_t(2048), size_t(151669)}) {
    for (float spread : {1.0f, 30.0f}) {
      std::normal_distribution<float> logit(0.0f, spread);
      std::vector<float> row(n);
      for (auto& v : row) v = logit(rng);
      if (n > 4) row[3] = -std::numeric_limits<float>::infinity();
      const long double max = *std::max_element(row.begin(), row.end());
      long double sum = 0;
      for (float v : row) sum += std::exp((long double)v - max);
      const double exact = double(max + std::log(sum));
      EXPECT_NEAR(log_sum_exp(row.data(), n), exact, 1e-6 * std::max(1.0, std::fabs(exact))) << n << " values, spread " << spread;
    }
  }
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> masked = {-inf, -inf};
  EXPECT_EQ(log_sum_exp(masked.data(), 2), -double(inf)) << "log 0";
  EXPECT_EQ(log_sum_exp(nullptr, 0), -double(inf));
  const std::vector<float> one = {2.5f};
  EXPECT_DOUBLE_EQ(log_sum_exp(one.data(), 1), 2.5);
}

TEST(Softmax, ANanFirstOrLaterMakesTheRowNan) {
  for (size_t at : {0u, 1u, 17u}) {
    std::vector<float> x(20, 1.0f);
    x[at] = std::numeric_limits<float>::quiet_NaN();
    softmax(x.data(), x.size());
    for (float v : x) EXPECT_TRUE(std::isnan(v)) << "NaN at " << at;
  }
}

TEST(Softmax, SumsToOneAndKeepsTheOrder) {
  std::vector<float> x{1.0f, 3.0f, 2.0f, -1.0f};
  softmax(x.data(), x.size());
  EXPECT_NEAR(x[0] + x[1] + x[2] + x[3], 1.0f, 1e-6f);
  EXPECT_GT(x[1], x[2]);
  EXPECT_GT(x[2], x[0]);
  EXPECT_GT(x[0], x[3]);
}

}  // namespace
}  // namespace larql
