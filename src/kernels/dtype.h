// Element types of stored weights. Weights stay in their stored type (mmap'd), and the
// kernels convert on the fly.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "wire/f16.h"

namespace larql {

enum class DType { f32, f16, bf16 };

inline size_t dtype_size(DType t) { return t == DType::f32 ? 4 : 2; }

inline std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
  }
  return "?";
}

inline float bf16_to_f32(uint16_t v) { return std::bit_cast<float>(uint32_t{v} << 16); }

// Round to nearest even; NaN stays NaN.
inline uint16_t f32_to_bf16(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40);
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

inline float load_as_f32(DType t, const void* base, size_t i) {
  switch (t) {
    case DType::f32: return static_cast<const float*>(base)[i];
    case DType::f16: return wire::f16_to_f32(static_cast<const uint16_t*>(base)[i]);
    case DType::bf16: return bf16_to_f32(static_cast<const uint16_t*>(base)[i]);
  }
  return 0;
}

// A row-major [rows][cols] weight matrix (or a vector: rows = 1) viewed in place.
struct Matrix {
  DType dtype = DType::f32;
  size_t rows = 0;
  size_t cols = 0;
  const void* data = nullptr;

  const uint8_t* row_ptr(size_t r) const { return static_cast<const uint8_t*>(data) + r * cols * dtype_size(dtype); }
  size_t bytes() const { return rows * cols * dtype_size(dtype); }
};

}  // namespace larql
