// Little-endian loads and stores on unaligned byte buffers. The wire is little-endian
// and so is every host we build for; the static_assert keeps it that way.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>

namespace larql {

static_assert(std::endian::native == std::endian::little,
              "larql's codec copies little-endian wire values directly; big-endian hosts are unsupported");

inline uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
inline uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline float load_f32(const uint8_t* p) {
  float v;
  std::memcpy(&v, p, 4);
  return v;
}
inline void store_u32(uint8_t* p, uint32_t v) { std::memcpy(p, &v, 4); }
inline void store_f32(uint8_t* p, float v) { std::memcpy(p, &v, 4); }

}  // namespace larql
