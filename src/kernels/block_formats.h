// GGML's block formats, byte for byte as ggml-common.h lays them out and ggml-quants.c
// (the reference, non-SIMD functions) fills them. Blocks of 32 values:
//
//   q8_0  f16 d, i8 q[32]                     value j = d * q[j]
//   q4_0  f16 d, u8 qs[16]                    value j = d * (n_j - 8)
//   q4_1  f16 d, f16 m, u8 qs[16]             value j = d * n_j + m
//   q5_0  f16 d, u32 qh, u8 qs[16]            value j = d * ((n_j | h_j << 4) - 16)
//   q5_1  f16 d, f16 m, u32 qh, u8 qs[16]     value j = d * (n_j | h_j << 4) + m
//
//   mxfp4 u8 e, u8 qs[16]                     value j = 2^(e−128) · kMxfp4Values[n_j]
//
// n_j is the low nibble of qs[j] for j < 16 and the high nibble of qs[j - 16] otherwise;
// h_j is bit j of qh (little-endian). mxfp4's nibbles are E2M1 codes (sign, two exponent
// bits, one mantissa bit) read through GGML's table of their doubled values, which is why
// its E8M0 scale byte e stands for 2^(e−128), half the OCP format's 2^(e−127); e = 0xFF
// (NaN in OCP's E8M0) reads as 2^127, as GGML reads it.
//
// K-quants: super-blocks of 256 values, read here as eight blocks of 32 (k = 0..7):
//
//   q4_k  f16 d, f16 dmin, u8 sc[12], u8 qs[128]             value = (d·s_k) · n − dmin·m_k
//   q5_k  f16 d, f16 dmin, u8 sc[12], u8 qh[32], u8 qs[128]  value = (d·s_k) · (n | h << 4) − dmin·m_k
//   q6_k  u8 ql[128], u8 qh[64], i8 sc[16], f16 d            value = (d·sc_i) · ((n | h << 4) − 32)
//
// q4_k/q5_k: six-bit scales s_k and mins m_k packed in sc (unpack_scales_mins); value j of
// block k has n in the low nibble of qs[32·(k/2) + j] for even k, the high one for odd k,
// and h = bit k of qh[j]. q6_k: one scale per 16 values (i = 2k for a block's first half,
// 2k + 1 for its second); block k = 4·half + i takes n from ql[64·half + 32·(i mod 2) + j]
// (low nibble for i < 2, high for i ≥ 2) and h = bits 2i, 2i+1 of qh[32·half + j].
//
// Every scale d · s is exact in f32 (an 11-bit significand times a small integer), and
// so is its product with the integer, so a value has at most one rounding (the "+ m" or
// "− dmin·m"), and every kernel computes the same float for it.
//
// Products with these weights follow one contract per kind: block_dot.h's for the
// 32-value formats, kquant_dot.h's (by super-block, "q8k") for the K-quants.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "base/byte_io.h"
#include "kernels/dtype.h"

namespace larql::blocks {

inline constexpr size_t kValues = 32;       // values per block
inline constexpr size_t kSuperValues = 256;  // values per K-quant super-block

using larql::load_u16;
using larql::load_u32;
inline float half_at(const uint8_t* p) { return f16_to_f32(load_u16(p)); }

// Where the parts of a 32-value 4- or 5-bit block are (byte offsets; 0 = absent; the scale
// is at 0), and the integer subtracted from each quantised value.
struct Layout {
  size_t qs, qh, m;
  int zero;
};
template <DType T>
constexpr Layout layout() {
  static_assert(T == DType::q4_0 || T == DType::q4_1 || T == DType::q5_0 || T == DType::q5_1 || T == DType::mxfp4);
  if constexpr (T == DType::mxfp4) return {1, 0, 0, 0};  // its nibbles are codes (kMxfp4Values), not offset integers
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
    case DType::q4_k: return fn.template operator()<DType::q4_k>();
    case DType::q5_k: return fn.template operator()<DType::q5_k>();
    case DType::q6_k: return fn.template operator()<DType::q6_k>();
    case DType::mxfp4: return fn.template operator()<DType::mxfp4>();
    case DType::f32:
    case DType::f16:
    case DType::bf16: return;
  }
}

constexpr bool is_kquant(DType t) { return t == DType::q4_k || t == DType::q5_k || t == DType::q6_k; }

// with_block_format for the 32-value formats only (block_dot.h's tiles).
template <typename Fn>
void with_32_value_format(DType t, Fn&& fn) {
  with_block_format(t, [&]<DType T>() {
    if constexpr (!is_kquant(T)) fn.template operator()<T>();
  });
}

// with_block_format for the K-quants only (kquant_dot.h's tiles).
template <typename Fn>
void with_kquant_format(DType t, Fn&& fn) {
  with_block_format(t, [&]<DType T>() {
    if constexpr (is_kquant(T)) fn.template operator()<T>();
  });
}

// Whether the format adds a minimum to each scaled integer (value = scale · q + min).
constexpr bool has_min(DType t) { return t == DType::q4_1 || t == DType::q5_1 || t == DType::q4_k || t == DType::q5_k; }

// Formats whose integers are signed as the tiles read them (no zero point to take off).
constexpr bool has_signed_integers(DType t) { return t == DType::q8_0 || t == DType::mxfp4; }

// mxfp4: the E2M1 codes' values, doubled (GGML's kvalues_mxfp4), and its scale byte's
// 2^(e−128) (GGML's e8m0_to_fp32_half; subnormal for e < 2). Both exact.
inline constexpr int8_t kMxfp4Values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
inline float e8m0_half(uint8_t e) {
  const uint32_t bits = e < 2 ? 0x00200000u << e : uint32_t(e - 1) << 23;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Where the parts of a q4_k or q5_k super-block are (d at 0, dmin at 2; qh 0 = absent).
struct KLayout {
  size_t scales, qh, qs;
};
template <DType T>
constexpr KLayout k_layout() {
  static_assert(T == DType::q4_k || T == DType::q5_k);
  if constexpr (T == DType::q4_k) return {4, 0, 16};
  return {4, 16, 48};
}
// q6_k's parts.
struct Q6Layout {
  static constexpr size_t ql = 0, qh = 128, scales = 192, d = 208;
};

// q4_k/q5_k: the eight six-bit scales (out[0..7]) and mins (out[8..15]) packed in 12 bytes
// (GGML's get_scale_min_k4, four values at a time).
inline void unpack_scales_mins(const uint8_t* packed, uint8_t out[16]) {
  constexpr uint32_t kLow6 = 0x3f3f3f3f, kLow4 = 0x0f0f0f0f, kLow2 = 0x03030303;
  uint32_t u[3];
  std::memcpy(u, packed, 12);
  const uint32_t words[4] = {u[0] & kLow6, (u[2] & kLow4) | (((u[0] >> 6) & kLow2) << 4), u[1] & kLow6,
                             ((u[2] >> 4) & kLow4) | (((u[1] >> 6) & kLow2) << 4)};
  std::memcpy(out, words, 16);
}

// Integer j (< 32) of block k (< 8) of a K-quant super-block, its zero point subtracted.
template <DType T>
inline int kquant_integer(const uint8_t* sb, size_t k, size_t j) {
  if constexpr (T == DType::q6_k) {
    const size_t half = k / 4, i = k % 4;
    const uint8_t low = sb[Q6Layout::ql + 64 * half + 32 * (i % 2) + j];
    const int high = (sb[Q6Layout::qh + 32 * half + j] >> (2 * i)) & 3;
    return ((i < 2 ? low & 0x0F : low >> 4) | high << 4) - 32;
  } else {
    constexpr KLayout L = k_layout<T>();
    const uint8_t packed = sb[L.qs + 32 * (k / 2) + j];
    int q = k % 2 == 0 ? packed & 0x0F : packed >> 4;
    if constexpr (L.qh != 0) q |= ((sb[L.qh + j] >> k) & 1) << 4;
    return q;
  }
}

// Integer j (< 32) of one block, its zero point subtracted: value j = d * q (+ m).
template <DType T>
inline int block_integer(const uint8_t* b, size_t j) {
  if constexpr (T == DType::q8_0) {
    return int8_t(b[2 + j]);
  } else {
    constexpr Layout L = layout<T>();
    const uint8_t* qs = b + L.qs;
    int q = j < 16 ? (qs[j] & 0x0F) : (qs[j - 16] >> 4);
    if constexpr (T == DType::mxfp4) return kMxfp4Values[q];  // a code, not an offset integer
    if constexpr (L.qh != 0) q |= int((load_u32(b + L.qh) >> j) & 1) << 4;
    return q - L.zero;
  }
}

// The block's scale d: an f16 at its start, or mxfp4's scale byte.
template <DType T>
inline float block_scale(const uint8_t* b) {
  if constexpr (T == DType::mxfp4) return e8m0_half(b[0]);
  return half_at(b);
}

// The block's minimum m (0 for the formats without one).
template <DType T>
inline float block_min(const uint8_t* b) {
  if constexpr (has_min(T)) return half_at(b + layout<T>().m);
  return 0.0f;
}

// Block b (32 values) of a row of a block format, read the scalar way: its integers and,
// per group of four values, the scale and minimum (0 when the format has none), so that
// value j = scale[j/4] · q[j] (+ min[j/4]). The kernels' oracle, and dequantisation's.
struct UnpackedBlock {
  int8_t q[32];
  float scale[8], min[8];
};
UnpackedBlock unpack_block(DType t, const uint8_t* row, size_t b);

// Value j of an unpacked block, as its format defines it.
inline float unpacked_value(DType t, const UnpackedBlock& u, size_t j) {
  const float scaled = u.scale[j / 4] * float(u.q[j]);  // exact
  return has_min(t) ? scaled + u.min[j / 4] : scaled;
}

// GGML's reference quantiser for one block (32 values, or 256 for the K-quants) of finite
// values. The K-quants' scales and mins come from GGML's least-squares search
// (kquant_quantize.cc).
void quantize_block(DType t, const float* x, uint8_t* out);
void quantize_kquant_block(DType t, const float* x, uint8_t* out);  // the K-quant cases

// A whole row: n values (a multiple of the block size) to dtype_bytes(t, n) bytes.
void quantize_row(DType t, const float* x, size_t n, uint8_t* out);

}  // namespace larql::blocks
