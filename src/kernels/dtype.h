// Stored weight formats. Weights stay in their stored format (mmap'd), and the kernels
// convert on the fly. A format is either one element per value (f32, f16, bf16), one of
// GGML's blocks of 32 values sharing an f16 scale (q8_0, q4_0, q4_1, q5_0, q5_1), or one
// of GGML's K-quant super-blocks of 256 (q4_k, q5_k, q6_k), or MXFP4 (OCP microscaling
// FP4: blocks of 32 four-bit values sharing a power-of-two scale byte); layouts in
// kernels/block_formats.h. Everything a format is lives in kDTypes, one row each.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

#include "base/f16.h"

namespace larql {

enum class DType { f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k, mxfp4 };

struct DTypeTraits {
  DType type;
  std::string_view name;   // as larql prints it and takes it on the command line
  uint32_t ggml_type;      // GGML's enum ggml_type value, the type id in a GGUF file
  size_t block_values;     // values sharing one block (1 for the element types)
  size_t block_bytes;      // bytes of one block
};

inline constexpr DTypeTraits kDTypes[] = {
    {DType::f32, "f32", 0, 1, 4},     {DType::f16, "f16", 1, 1, 2},       {DType::bf16, "bf16", 30, 1, 2},
    {DType::q8_0, "q8_0", 8, 32, 34}, {DType::q4_0, "q4_0", 2, 32, 18}, {DType::q4_1, "q4_1", 3, 32, 20},
    {DType::q5_0, "q5_0", 6, 32, 22}, {DType::q5_1, "q5_1", 7, 32, 24},  {DType::q4_k, "q4_k", 12, 256, 144},
    {DType::q5_k, "q5_k", 13, 256, 176}, {DType::q6_k, "q6_k", 14, 256, 210},
    {DType::mxfp4, "mxfp4", 39, 32, 17},
};

inline constexpr const DTypeTraits& dtype_traits(DType t) { return kDTypes[static_cast<size_t>(t)]; }
static_assert([] {
  for (size_t i = 0; i < std::size(kDTypes); ++i)
    if (static_cast<size_t>(kDTypes[i].type) != i) return false;
  return true;
}(), "kDTypes is indexed by DType");

inline std::string_view dtype_name(DType t) { return dtype_traits(t).name; }
inline bool dtype_is_blocked(DType t) { return dtype_traits(t).block_values > 1; }
inline std::optional<DType> dtype_from_ggml(uint32_t ggml_type) {
  for (const auto& d : kDTypes)
    if (d.ggml_type == ggml_type) return d.type;
  return std::nullopt;
}
inline std::optional<DType> dtype_from_name(std::string_view name) {
  for (const auto& d : kDTypes)
    if (d.name == name) return d.type;
  return std::nullopt;
}

// Bytes of `values` consecutive values; `values` must be a multiple of the block size
// (the loaders check each row before building a Matrix).
inline size_t dtype_bytes(DType t, size_t values) {
  const auto& d = dtype_traits(t);
  return values / d.block_values * d.block_bytes;
}

inline float bf16_to_f32(uint16_t v) { return std::bit_cast<float>(uint32_t{v} << 16); }

// Round to nearest even; NaN stays NaN.
inline uint16_t f32_to_bf16(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40);
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

// Value i of a row of a block format (block_formats.h).
float block_load_as_f32(DType t, const void* base, size_t i);

// Value i of a row (or vector) stored at `base`, exactly as its format defines it. Inline
// for the element formats: norms and biases read every value this way.
inline float load_as_f32(DType t, const void* base, size_t i) {
  const auto* p = static_cast<const uint8_t*>(base);
  uint16_t h;
  switch (t) {
    case DType::f32: {
      float v;
      std::memcpy(&v, p + 4 * i, 4);
      return v;
    }
    case DType::f16: std::memcpy(&h, p + 2 * i, 2); return f16_to_f32(h);
    case DType::bf16: std::memcpy(&h, p + 2 * i, 2); return bf16_to_f32(h);
    case DType::q8_0:
    case DType::q4_0:
    case DType::q4_1:
    case DType::q5_0:
    case DType::q5_1:
    case DType::q4_k:
    case DType::q5_k:
    case DType::q6_k:
    case DType::mxfp4: break;
  }
  return block_load_as_f32(t, base, i);
}

// The first n values of a row, dequantised (n a multiple of the block size).
void dequantize_row(DType t, const void* row, size_t n, float* out);

// How products with bf16 weights are computed, the one format with a choice: "f32" keeps
// the activations exact (matvec.h's contract), "bf16-dot" rounds them to bf16 and sums as
// the CPU's bf16 dot product does (bf16_dot.h). Other formats have one arithmetic each.
enum class Arithmetic { f32, bf16_dot };

inline constexpr std::string_view kArithmeticNames[] = {"f32", "bf16-dot"};
inline std::string_view arithmetic_name(Arithmetic a) { return kArithmeticNames[static_cast<size_t>(a)]; }
inline std::optional<Arithmetic> arithmetic_from_name(std::string_view name) {
  for (size_t i = 0; i < std::size(kArithmeticNames); ++i)
    if (kArithmeticNames[i] == name) return static_cast<Arithmetic>(i);
  return std::nullopt;
}

// A row-major [rows][cols] weight matrix (or a vector: rows = 1) viewed in place.
struct Matrix {
  DType dtype = DType::f32;
  size_t rows = 0;
  size_t cols = 0;
  const void* data = nullptr;
  Arithmetic arithmetic = Arithmetic::f32;  // used by bf16 weights only

  // The arithmetic its products use: the chosen one for bf16 weights; "f32" names the
  // only one of every other format.
  Arithmetic effective_arithmetic() const { return dtype == DType::bf16 ? arithmetic : Arithmetic::f32; }

  size_t row_bytes() const { return dtype_bytes(dtype, cols); }
  const uint8_t* row_ptr(size_t r) const { return static_cast<const uint8_t*>(data) + r * row_bytes(); }
  size_t bytes() const { return rows * row_bytes(); }
  // Rows [first, first + count) as a matrix of their own, in place.
  Matrix row_range(size_t first, size_t count) const { return {dtype, count, cols, row_ptr(first), arithmetic}; }
};

// How a range's products are computed, as /v1/stats names it (ffn_arithmetic, PROTOCOL §8;
// layers_arithmetic, §13): "f32" when every product follows matvec.h's contract or
// block_dot.h's, else the arithmetics it adds joined by "+": "bf16-dot" (bf16 weights by
// choice, bf16_dot.h), "q8k" (K-quant weights, kquant_dot.h), "bf16-dot+q8k". Two ranges
// give the same bits only when their names are equal.
struct RangeArithmetic {
  bool bf16_dot = false, q8k = false;
  void add(const Matrix& m);  // one more product of the range
  std::string name() const;
  static std::optional<RangeArithmetic> from_name(std::string_view name);
  bool operator==(const RangeArithmetic&) const = default;
};

}  // namespace larql
