// The tiny Gemma checkpoints of tests/data/gemma (tools/make_gemma_fixtures.sh) and what
// the PyTorch reference (tools/gemma_reference.py) computed for them.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace larql::test {

struct GemmaReference {
  std::vector<int> tokens;
  std::vector<std::vector<float>> logits;  // [position][vocab]
  std::vector<int> greedy;                 // ids after the tokens
};

inline std::filesystem::path gemma_fixture(const std::string& family) {
  return std::filesystem::path(LARQL_SOURCE_DIR) / "tests" / "data" / "gemma" / family;
}

inline GemmaReference gemma_reference(const std::string& family) {
  std::ifstream in(gemma_fixture(family) / "reference.json");
  const nlohmann::json j = nlohmann::json::parse(in);
  return {j.at("tokens").get<std::vector<int>>(), j.at("logits").get<std::vector<std::vector<float>>>(),
          j.at("greedy").get<std::vector<int>>()};
}

// The bar: per position, max |Δ| ≤ 1e-4 × (max logit − min logit) of the reference.
// Returns the largest ratio |Δ| / range seen, for the test to print.
inline double expect_logits_match(const std::vector<std::vector<float>>& reference, const std::vector<std::vector<float>>& got,
                                  const std::string& what) {
  EXPECT_EQ(got.size(), reference.size()) << what;
  double worst = 0;
  for (size_t p = 0; p < std::min(got.size(), reference.size()); ++p) {
    const auto [lo, hi] = std::minmax_element(reference[p].begin(), reference[p].end());
    const double range = double(*hi) - double(*lo);
    double diff = 0;
    EXPECT_EQ(got[p].size(), reference[p].size()) << what;
    for (size_t i = 0; i < std::min(got[p].size(), reference[p].size()); ++i)
      diff = std::max(diff, std::fabs(double(got[p][i]) - reference[p][i]));
    EXPECT_LE(diff, 1e-4 * range) << what << ": position " << p << " differs by " << diff << " (logit range " << range << ")";
    worst = std::max(worst, diff / range);
  }
  return worst;
}

}  // namespace larql::test
