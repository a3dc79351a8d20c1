// The committed demo model (models/demo) that the integration tests run on, and walk-ffn
// request bodies of its shape.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "wire/codec.h"

namespace larql::test {

inline const std::string kDemo = std::string(LARQL_SOURCE_DIR) + "/models/demo";
inline constexpr size_t kDemoHidden = 384;
inline constexpr size_t kDemoLayers = 6;

// Rows of a request over all six layers that keeps a demo shard computing for seconds (the
// tests of a busy shard send one). The sanitized shard computes 20-25x slower, so an eighth
// of the rows still keeps it busy longer there than 8192 do in the release build.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr uint32_t kBusyRows = 1024;
#else
inline constexpr uint32_t kBusyRows = 8192;
#endif

// An f32 walk-ffn request for the demo model: `rows` positions of the values
// scale × (-3, -2, …, 3, -3, …), finite for any finite scale.
inline std::string demo_f32_request(const std::vector<uint32_t>& layers, uint32_t rows, float scale = 0.01f) {
  std::vector<float> x(size_t(rows) * kDemoHidden);
  for (size_t i = 0; i < x.size(); ++i) x[i] = scale * float(int(i % 7) - 3);
  std::string body;
  EXPECT_TRUE(wire::encode_request(wire::Encoding::f32, {.layers = layers, .seq_len = rows}, kDemoHidden, x, body).ok());
  return body;
}

}  // namespace larql::test
