// The tiny checkpoints of tests/data/gemma and tests/data/moe (tools/make_gemma_fixtures.sh,
// tools/make_moe_fixtures.sh) and what the PyTorch references (tools/gemma_reference.py,
// tools/moe_reference.py) computed for them; larql's logits and greedy ids against them.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "infer/local_ffn.h"
#include "infer/transformer.h"
#include "support/greedy.h"

namespace larql::test {

struct ReferenceOutput {
  std::vector<int> tokens;
  std::vector<std::vector<float>> logits;  // [position][vocab]
  std::vector<int> greedy;                 // ids after the tokens
};

inline std::filesystem::path gemma_fixture(const std::string& family) {
  return std::filesystem::path(LARQL_SOURCE_DIR) / "tests" / "data" / "gemma" / family;
}

inline std::filesystem::path moe_fixture(const std::string& family) {
  return std::filesystem::path(LARQL_SOURCE_DIR) / "tests" / "data" / "moe" / family;
}

inline ReferenceOutput reference_output(const std::filesystem::path& fixture) {
  std::ifstream in(fixture / "reference.json");
  const nlohmann::json j = nlohmann::json::parse(in);
  return {j.at("tokens").get<std::vector<int>>(), j.at("logits").get<std::vector<std::vector<float>>>(),
          j.at("greedy").get<std::vector<int>>()};
}

inline ReferenceOutput gemma_reference(const std::string& family) { return reference_output(gemma_fixture(family)); }

// The issues' bar: per position, max |Δ| ≤ tolerance × (max logit − min logit) of the
// reference. Returns the largest ratio |Δ| / range seen, for the test to print.
inline double expect_logits_match(const std::vector<std::vector<float>>& reference, const std::vector<std::vector<float>>& got,
                                  const std::string& what, double tolerance = 1e-4) {
  EXPECT_EQ(got.size(), reference.size()) << what;
  double worst = 0;
  for (size_t p = 0; p < std::min(got.size(), reference.size()); ++p) {
    const auto [lo, hi] = std::minmax_element(reference[p].begin(), reference[p].end());
    const double range = double(*hi) - double(*lo);
    double diff = 0;
    EXPECT_EQ(got[p].size(), reference[p].size()) << what;
    for (size_t i = 0; i < std::min(got[p].size(), reference[p].size()); ++i)
      diff = std::max(diff, std::fabs(double(got[p][i]) - reference[p][i]));
    EXPECT_LE(diff, tolerance * range) << what << ": position " << p << " differs by " << diff << " (logit range " << range << ")";
    worst = std::max(worst, diff / range);
  }
  return worst;
}

// Logits at every position: one prefill, or one token at a time through the KV cache.
inline std::vector<std::vector<float>> all_logits(const Model& m, const std::vector<int>& tokens, bool prefill) {
  ThreadPool pool(2);
  LocalFfn ffn(m, pool);
  Transformer t(m, ffn, pool);
  std::vector<std::vector<float>> out;
  std::vector<float> l;
  if (prefill) {
    EXPECT_TRUE(t.forward_logits(tokens, 0, 0, l).ok());
    for (size_t p = 0; p < tokens.size(); ++p) out.emplace_back(l.begin() + p * m.config.vocab, l.begin() + (p + 1) * m.config.vocab);
    return out;
  }
  for (size_t p = 0; p < tokens.size(); ++p) {
    EXPECT_TRUE(t.forward({&tokens[p], 1}, p, l).ok());
    out.push_back(l);
  }
  return out;
}

inline std::vector<int> local_greedy(const Model& m, const std::vector<int>& tokens, size_t steps) {
  ThreadPool pool(2);
  LocalFfn ffn(m, pool);
  std::vector<std::vector<float>> logits;
  return greedy_with_logits(m, ffn, tokens, steps, &logits, 2);
}

// Logits by prefill and token by token within `tolerance` of the reference's range, and its greedy ids.
inline void expect_matches_reference(const Model& m, const ReferenceOutput& ref, const std::string& what, double tolerance = 1e-4) {
  const double prefill = expect_logits_match(ref.logits, all_logits(m, ref.tokens, true), what + " prefill", tolerance);
  const double stepped = expect_logits_match(ref.logits, all_logits(m, ref.tokens, false), what + " token by token", tolerance);
  EXPECT_EQ(local_greedy(m, ref.tokens, ref.greedy.size()), ref.greedy) << what;
  std::printf("%s: max |logit - reference| / logit range = %.2e (prefill), %.2e (token by token)\n", what.c_str(), prefill,
              stepped);
}

}  // namespace larql::test
