// Greedy decoding for tests that compare two FFN backends step by step: the chosen ids,
// and every step's logits.
#pragma once

#include <gtest/gtest.h>

#include <vector>

#include "infer/sampler.h"
#include "infer/transformer.h"

namespace larql::test {

inline std::vector<int> greedy_with_logits(const Model& m, FfnBackend& ffn, const std::vector<int>& prompt, size_t steps,
                                           std::vector<std::vector<float>>* logits, size_t threads = 1) {
  ThreadPool pool(threads);
  Transformer t(m, ffn, pool);
  std::vector<int> ids = prompt;
  std::vector<float> l;
  EXPECT_TRUE(t.forward(prompt, 0, l).ok());
  for (size_t s = 0; s < steps; ++s) {
    logits->push_back(l);
    ids.push_back(argmax(l));
    auto st = t.forward({&ids.back(), 1}, ids.size() - 1, l);
    EXPECT_TRUE(st.ok()) << (st.ok() ? "" : st.error().message);
    if (!st.ok()) break;
  }
  return {ids.begin() + std::ptrdiff_t(prompt.size()), ids.end()};
}

}  // namespace larql::test
