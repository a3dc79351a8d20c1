// Scalar IEEE 754 binary16 conversions: round to nearest, ties to even (what F16C's
// vcvtps2ph does with _MM_FROUND_TO_NEAREST_INT). The reference the SIMD kernels are
// tested against bit for bit.
#pragma once

#include <bit>
#include <cstdint>

namespace larql {

inline constexpr float kF16Max = 65504.0f;
// The smallest magnitude that rounds to f16 infinity: 65520 = 65504 + half an ulp.
inline constexpr uint32_t kF16OverflowBits = 0x477ff000u;

inline uint16_t f32_to_f16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u)  // NaN: keep it quiet and keep the top payload bits
    return static_cast<uint16_t>(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));
  if (abs >= kF16OverflowBits) return static_cast<uint16_t>(sign | 0x7c00u);  // ±inf
  if (abs < 0x38800000u) {  // below 2^-14: an f16 subnormal or zero
    if (abs < 0x33000000u) return sign;  // below 2^-25 rounds to zero
    const uint32_t exp = abs >> 23;
    const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - exp;  // value / 2^-24 = mant * 2^(exp - 126)
    uint32_t q = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u))) ++q;
    return static_cast<uint16_t>(sign | q);
  }
  const uint32_t rebased = abs - 0x38000000u;  // exponent bias 127 → 15
  uint32_t q = rebased >> 13;
  const uint32_t rem = rebased & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (q & 1u))) ++q;  // a carry into the exponent is right
  return static_cast<uint16_t>(sign | q);
}

inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    const float magnitude = static_cast<float>(mant) * 0x1p-24f;  // exact
    return std::bit_cast<float>(sign | std::bit_cast<uint32_t>(magnitude));
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
  return std::bit_cast<float>(sign | ((exp + 112) << 23) | (mant << 13));
}

inline bool f16_is_finite(uint16_t h) { return (h & 0x7c00u) != 0x7c00u; }

}  // namespace larql
