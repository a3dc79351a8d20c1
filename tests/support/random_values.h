// Deterministic random residual-like values for codec tests.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace larql::test {

// Normally distributed values with a per-row magnitude that varies over orders of
// magnitude, like residual streams whose early positions are much larger.
inline std::vector<float> random_rows(size_t rows, size_t hidden, uint32_t seed, float max_row_scale = 1000.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> log_scale(-3.0f, std::log10(max_row_scale));
  std::vector<float> v(rows * hidden);
  for (size_t r = 0; r < rows; ++r) {
    const float s = std::pow(10.0f, log_scale(rng));
    for (size_t i = 0; i < hidden; ++i) v[r * hidden + i] = normal(rng) * s;
  }
  return v;
}

}  // namespace larql::test
