// GGML's 32-value block formats, byte for byte as ggml-common.h lays them out and
// ggml-quants.c (the reference, non-SIMD functions) fills them:
//
//   q8_0  f16 d, i8 q[32]                     value j = d * q[j]
//   q4_0  f16 d, u8 qs[16]                    value j = d * (n_j - 8)
//   q4_1  f16 d, f16 m, u8 qs[16]             value j = d * n_j + m
//   q5_0  f16 d, u32 qh, u8 qs[16]            value j = d * ((n_j | h_j << 4) - 16)
//   q5_1  f16 d, f16 m, u32 qh, u8 qs[16]     value j = d * (n_j | h_j << 4) + m
//
// n_j is the low nibble of qs[j] for j < 16 and the high nibble of qs[j - 16] otherwise;
// h_j is bit j of qh (little-endian). Each product d * q is exact in f32 (an 11-bit
// significand times an integer below 2^8), so a value has exactly one rounding at most
// (the "+ m"), and every kernel computes the same float for it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/dtype.h"
#include "wire/byte_io.h"

namespace larql::blocks {

inline constexpr size_t kValues = 32;

using wire::load_u16;
using wire::load_u32;
inline float half_at(const uint8_t* p) { return wire::f16_to_f32(load_u16(p)); }

// Where the parts of a 4- or 5-bit block are (byte offsets; 0 = absent; d is at 0), and
// the integer subtracted from each quantised value.
struct Layout {
  size_t qs, qh, m;
  int zero;
};
template <DType T>
constexpr Layout layout() {
  static_assert(T == DType::q4_0 || T == DType::q4_1 || T == DType::q5_0 || T == DType::q5_1);
  if constexpr (T == DType::q4_0) return {2, 0, 0, 8};
  if constexpr (T == DType::q4_1) return {4, 0, 2, 0};
  if constexpr (T == DType::q5_0) return {6, 2, 0, 16};
  return {8, 4, 2, 0};
}

// Calls fn.template operator()<T>() with the block format t as a compile-time value (the
// scalar readers below and the ISA files' tile tables); does nothing for the element formats.
template <typename Fn>
void with_block_format(DType t, Fn&& fn) {
  switch (t) {
    case DType::q8_0: return fn.template operator()<DType::q8_0>();
    case DType::q4_0: return fn.template operator()<DType::q4_0>();
    case DType::q4_1: return fn.template operator()<DType::q4_1>();
    case DType::q5_0: return fn.template operator()<DType::q5_0>();
    case DType::q5_1: return fn.template operator()<DType::q5_1>();
    case DType::f32:
    case DType::f16:
    case DType::bf16: return;
  }
}

// Whether the format adds a per-block minimum (value = d * q + m).
constexpr bool has_min(DType t) { return t == DType::q4_1 || t == DType::q5_1; }

// Integer j (< 32) of one block, its zero point subtracted: value j = d * q (+ m).
template <DType T>
inline int block_integer(const uint8_t* b, size_t j) {
  if constexpr (T == DType::q8_0) {
    return int8_t(b[2 + j]);
  } else {
    constexpr Layout L = layout<T>();
    const uint8_t* qs = b + L.qs;
    int q = j < 16 ? (qs[j] & 0x0F) : (qs[j - 16] >> 4);
    if constexpr (L.qh != 0) q |= int((load_u32(b + L.qh) >> j) & 1) << 4;
    return q - L.zero;
  }
}

// The block's minimum m (0 for the formats without one).
template <DType T>
inline float block_min(const uint8_t* b) {
  if constexpr (has_min(T)) return half_at(b + layout<T>().m);
  return 0.0f;
}

// Value j (< 32) of one block of a blocked format.
inline float block_value(DType t, const uint8_t* b, size_t j) {
  float value = 0;
  with_block_format(t, [&]<DType T>() {
    const float scaled = half_at(b) * float(block_integer<T>(b, j));  // exact
    value = has_min(T) ? scaled + block_min<T>(b) : scaled;
  });
  return value;
}

// GGML's reference quantiser for one block of 32 finite values.
void quantize_block(DType t, const float* x, uint8_t* out);

// A whole row: n values (a multiple of 32 for the blocked formats) to dtype_bytes(t, n) bytes.
void quantize_row(DType t, const float* x, size_t n, uint8_t* out);

}  // namespace larql::blocks
