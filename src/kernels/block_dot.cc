#include "kernels/block_dot.h"

#include <algorithm>
#include <cmath>
#include <limits>


namespace larql {
namespace {

// Round to nearest even, for |v| ≤ 127 (a little more after the product's rounding):
// adding and subtracting 1.5 · 2^23 leaves the integer the float unit's rounding chose.
// Inline arithmetic, unlike nearbyint's library call (this runs for every activation);
// exact IEEE arithmetic, which the build keeps (no -ffast-math).
int8_t round_to_int8(float v) {
  constexpr float kMagic = 12582912.0f;
  const float r = (std::clamp(v, -127.0f, 127.0f) + kMagic) - kMagic;
  return int8_t(r);
}

}  // namespace

void QuantizedActivations::quantize(const float* x, size_t n, size_t c) {
  rows = n;
  cols = c;
  blocks = c / blocks::kValues;
  lane_stride = (blocks + 1) / 2 * 16;
  q.resize(n * c);
  lane_scale.assign(n * lane_stride, 0.0f);
  lane_group_sum.assign(n * lane_stride, 0.0f);
  scaled_block_sum.assign(n * blocks, 0.0f);
  block_scale.assign(n * blocks, 0.0f);
  for (size_t r = 0; r < n; ++r)
    for (size_t b = 0; b < blocks; ++b) {
      const float* v = x + r * c + b * blocks::kValues;
      float amax = 0;
      bool finite = true;
      for (size_t i = 0; i < blocks::kValues; ++i) {
        finite = finite && std::isfinite(v[i]);
        amax = std::max(amax, std::fabs(v[i]));
      }
      const float d = finite ? amax / 127 : std::numeric_limits<float>::quiet_NaN();
      const float inverse = finite && d != 0 ? 1.0f / d : 0.0f;
      int8_t* qx = &q[r * c + b * blocks::kValues];
      for (size_t i = 0; i < blocks::kValues; ++i) qx[i] = finite ? round_to_int8(v[i] * inverse) : 0;
      const size_t lanes = r * lane_stride + 8 * b;
      int block_sum = 0;
      for (size_t g = 0; g < 8; ++g) {
        const int group_sum = qx[4 * g] + qx[4 * g + 1] + qx[4 * g + 2] + qx[4 * g + 3];
        lane_scale[lanes + g] = d;
        lane_group_sum[lanes + g] = float(group_sum);
        block_sum += group_sum;
      }
      scaled_block_sum[r * blocks + b] = d * float(block_sum);
      block_scale[r * blocks + b] = d;
    }
}

}  // namespace larql
