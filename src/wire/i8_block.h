// Rules shared by every i8 kernel (PROTOCOL §5): one block per position,
// [scale f32][zero_point f32][q i8 × H], scale = max|x| / 127 (1.0 for an all-zero row).
#pragma once

#include <cmath>
#include <cstdint>

#include "base/byte_io.h"
#include "wire/encoding.h"

namespace larql::wire {

// A scale a decoder accepts: finite, not negative, and 127 × scale still finite, so every
// decoded value is finite.
inline bool i8_scale_is_valid(float scale) {
  return std::isfinite(scale) && scale >= 0.0f && std::isfinite(scale * 127.0f);
}

inline float i8_scale_for_max(float max_abs) { return max_abs == 0.0f ? 1.0f : max_abs / 127.0f; }

inline void write_i8_block_header(uint8_t* block, float scale) {
  store_f32(block, scale);
  store_f32(block + 4, 0.0f);
}

inline int8_t clamp_i8(float q) { return static_cast<int8_t>(q > 127.0f ? 127.0f : (q < -127.0f ? -127.0f : q)); }

}  // namespace larql::wire
