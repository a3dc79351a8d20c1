// compare_logits against values worked out by hand: the numbers `larql bench` reports.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "eval/logit_compare.h"

namespace larql {
namespace {

TEST(LogitCompare, KlOfTwoHandComputedDistributions) {
  // softmax([0, ln 3]) = [1/4, 3/4]; softmax([0, 0]) = [1/2, 1/2].
  const std::vector<float> reference{0.0f, std::log(3.0f)}, uniform{0.0f, 0.0f};
  const auto c = compare_logits(reference, uniform, 1);
  // KL = 1/4 ln(1/4 ÷ 1/2) + 3/4 ln(3/4 ÷ 1/2) = -ln(2)/4 + 3/4 ln(3/2) = 0.130812…
  EXPECT_NEAR(c.kl, -std::log(2.0) / 4 + 0.75 * std::log(1.5), 1e-7);
  EXPECT_NEAR(c.max_abs_diff, std::log(3.0f), 1e-7);
  EXPECT_FALSE(c.top1_equal);  // index 1 against index 0 (the lower index wins a tie)
  EXPECT_FALSE(c.bit_identical);
  // The other way round: KL(1/2,1/2 ‖ 1/4,3/4) = 1/2 ln 2 + 1/2 ln(2/3) = 0.143841…
  EXPECT_NEAR(compare_logits(uniform, reference, 1).kl, 0.5 * std::log(2.0) + 0.5 * std::log(2.0 / 3.0), 1e-7);
}

TEST(LogitCompare, KlIgnoresAConstantShiftAndIsZeroForIdenticalLogits) {
  const std::vector<float> a{1.0f, -2.0f, 0.5f, 3.0f}, shifted{11.0f, 8.0f, 10.5f, 13.0f};
  const auto c = compare_logits(a, shifted, 2);
  EXPECT_NEAR(c.kl, 0.0, 1e-9);  // the same distribution
  EXPECT_EQ(c.max_abs_diff, 10.0f);
  EXPECT_TRUE(c.top1_equal);
  EXPECT_TRUE(c.topk_equal);
  const auto same = compare_logits(a, a, 3);
  EXPECT_TRUE(same.bit_identical);
  EXPECT_EQ(same.kl, 0.0);
  EXPECT_EQ(same.max_abs_diff, 0.0f);
}

TEST(LogitCompare, TopKComparesSetsNotOrder) {
  const std::vector<float> reference{3, 1, 2, 0}, other{3, 2, 1, 0};
  EXPECT_TRUE(compare_logits(reference, other, 1).top1_equal);   // index 0 in both
  EXPECT_FALSE(compare_logits(reference, other, 2).topk_equal);  // {0, 2} against {0, 1}
  EXPECT_TRUE(compare_logits(reference, other, 3).topk_equal);   // {0, 1, 2} in another order
  const std::vector<float> swapped_top{2.9f, 1, 3, 0};
  const auto c = compare_logits(reference, swapped_top, 2);
  EXPECT_FALSE(c.top1_equal);
  EXPECT_TRUE(c.topk_equal);  // {0, 2} both times
}

}  // namespace
}  // namespace larql
