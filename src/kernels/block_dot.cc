#include "kernels/block_dot.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/block_formats.h"

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
  const size_t pairs = (blocks + 1) / 2;
  q.resize(n * c);
  wide.resize(n * c);
  scale.resize(n * blocks);
  group_sum.resize(n * blocks * 8);
  pair_scale.assign(n * pairs * 16, 0.0f);
  pair_group_sum.assign(n * pairs * 16, 0.0f);
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
      const size_t at = r * c + b * blocks::kValues;
      for (size_t i = 0; i < blocks::kValues; ++i) {
        q[at + i] = finite ? round_to_int8(v[i] * inverse) : 0;
        wide[at + i] = q[at + i];
      }
      scale[r * blocks + b] = d;
      const size_t pair_at = (r * pairs + b / 2) * 16 + 8 * (b % 2);
      for (size_t g = 0; g < 8; ++g) {
        int s = 0;
        for (size_t i = 4 * g; i < 4 * g + 4; ++i) s += q[at + i];
        group_sum[(r * blocks + b) * 8 + g] = float(s);
        pair_scale[pair_at + g] = d;
        pair_group_sum[pair_at + g] = float(s);
      }
    }
}

UnpackedBlock unpack_block(DType t, const uint8_t* b) {
  UnpackedBlock u{};
  u.scale = blocks::half_at(b);
  if (t == DType::q8_0) {
    for (size_t j = 0; j < 32; ++j) u.q[j] = int8_t(b[2 + j]);
    return u;
  }
  blocks::Layout L{};
  switch (t) {
    case DType::q4_0: L = blocks::layout<DType::q4_0>(); break;
    case DType::q4_1: L = blocks::layout<DType::q4_1>(); break;
    case DType::q5_0: L = blocks::layout<DType::q5_0>(); break;
    case DType::q5_1: L = blocks::layout<DType::q5_1>(); break;
    case DType::f32:
    case DType::f16:
    case DType::bf16:
    case DType::q8_0: break;
  }
  const uint32_t qh = L.qh ? blocks::load_u32(b + L.qh) : 0;
  for (size_t j = 0; j < 32; ++j) {
    int v = j < 16 ? (b[L.qs + j] & 0x0F) : (b[L.qs + j - 16] >> 4);
    v |= int((qh >> j) & 1) << 4;
    u.q[j] = int8_t(v - L.zero);
  }
  u.min = L.m ? blocks::half_at(b + L.m) : 0.0f;
  return u;
}

}  // namespace larql
