// Rules shared by every q8 kernel (PROTOCOL §11): blocks of 32 values, [d f16][q i8 × 32],
// d = f16(max|x| / 127), q = round-half-away(x / float(d)) clamped to ±127, x̂ = q × float(d).
#pragma once

#include <cmath>
#include <cstdint>

#include "base/f16.h"
#include "wire/encoding.h"

namespace larql::wire {

// The block scale for a finite block maximum `max_abs`; not finite (f16 infinity) when
// max_abs / 127 is beyond f16, and the message must then go as f32.
inline uint16_t q8_scale_for_max(float max_abs) { return f32_to_f16(max_abs / 127.0f); }

// A scale a decoder accepts: finite and not negative (-0 is zero, so it is accepted).
inline bool q8_scale_is_valid(uint16_t d) { return (f16_is_finite(d) && (d & 0x8000u) == 0) || d == 0x8000u; }

// round_half_away_from_zero(x / d) clamped to ±127, for d > 0.
inline int8_t q8_quantize(float x, float d) {
  const float q = std::round(x / d);
  return static_cast<int8_t>(q > 127.0f ? 127.0f : (q < -127.0f ? -127.0f : q));
}

}  // namespace larql::wire
