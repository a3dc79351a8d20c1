#include "kernels/block_formats.h"

#include <algorithm>
#include <cfloat>
#include <cmath>

namespace larql {
namespace blocks {
namespace {

void put_half(uint8_t* p, float v) {
  const uint16_t h = f32_to_f16(v);
  std::memcpy(p, &h, 2);
}

// (int8_t)(v) in GGML, without the undefined behaviour for values outside int8.
int truncate_i8(float v) { return int(std::clamp(v, -128.0f, 127.0f)); }

// The value of largest magnitude, with its sign (the first one on ties).
float signed_absmax(const float* x) {
  float amax = 0, max = 0;
  for (size_t j = 0; j < kValues; ++j)
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  return max;
}

void pack_nibbles(const int* q, uint8_t* qs) {
  for (size_t j = 0; j < 16; ++j) qs[j] = uint8_t((q[j] & 0x0F) | ((q[j + 16] & 0x0F) << 4));
}

uint32_t high_bits(const int* q) {
  uint32_t qh = 0;
  for (size_t j = 0; j < kValues; ++j) qh |= uint32_t((q[j] & 0x10) >> 4) << j;
  return qh;
}

// GGML's quantize_row_mxfp4_ref: the scale from the largest magnitude's binary exponent
// (its value 2^(e−128)·12 is then at least amax·1.5), each value the code nearest it
// (the lower code on ties). GGML casts the exponent to uint8_t unchecked; here a block
// whose largest magnitude is below 2^-125 takes e = 0 rather than wrapping.
void quantize_mxfp4_block(const float* x, uint8_t* out) {
  float amax = 0;
  for (size_t j = 0; j < kValues; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float exponent = amax > 0 ? std::floor(std::log2(amax)) - 2 + 127 : 0;
  const uint8_t e = uint8_t(std::clamp(exponent, 0.0f, 254.0f));
  const float d = e8m0_half(e);
  auto nearest = [&](float v) {
    int best = 0;
    float best_err = std::fabs(kMxfp4Values[0] * d - v);
    for (int i = 1; i < 16; ++i) {
      const float err = std::fabs(kMxfp4Values[i] * d - v);
      if (err < best_err) {
        best = i;
        best_err = err;
      }
    }
    return best;
  };
  out[0] = e;
  for (size_t j = 0; j < 16; ++j) out[1 + j] = uint8_t(nearest(x[j]) | nearest(x[j + 16]) << 4);
}

}  // namespace

UnpackedBlock unpack_block(DType t, const uint8_t* row, size_t b) {
  UnpackedBlock u{};
  with_block_format(t, [&]<DType T>() {
    if constexpr (is_kquant(T)) {
      const uint8_t* sb = row + b / 8 * dtype_traits(T).block_bytes;
      const size_t k = b % 8;
      for (size_t j = 0; j < kValues; ++j) u.q[j] = int8_t(kquant_integer<T>(sb, k, j));
      if constexpr (T == DType::q6_k) {
        const float d = half_at(sb + Q6Layout::d);
        for (size_t g = 0; g < 8; ++g) u.scale[g] = d * float(int8_t(sb[Q6Layout::scales + 2 * k + g / 4]));
      } else {
        uint8_t sm[16];
        unpack_scales_mins(sb + k_layout<T>().scales, sm);
        const float scale = half_at(sb) * float(sm[k]), min = -(half_at(sb + 2) * float(sm[8 + k]));
        for (size_t g = 0; g < 8; ++g) {
          u.scale[g] = scale;
          u.min[g] = min;
        }
      }
    } else {
      const uint8_t* block = row + b * dtype_traits(T).block_bytes;
      for (size_t j = 0; j < kValues; ++j) u.q[j] = int8_t(block_integer<T>(block, j));
      const float scale = block_scale<T>(block), min = block_min<T>(block);
      for (size_t g = 0; g < 8; ++g) {
        u.scale[g] = scale;
        u.min[g] = min;
      }
    }
  });
  return u;
}

void quantize_block(DType t, const float* x, uint8_t* out) {
  int q[kValues];
  switch (t) {
    case DType::q8_0: {
      float amax = 0;
      for (size_t j = 0; j < kValues; ++j) amax = std::max(amax, std::fabs(x[j]));
      const float d = amax / 127, id = d != 0 ? 1.0f / d : 0.0f;
      put_half(out, d);
      for (size_t j = 0; j < kValues; ++j) out[2 + j] = uint8_t(int8_t(std::lround(x[j] * id)));
      return;
    }
    case DType::q4_0:
    case DType::q5_0: {
      const bool five = t == DType::q5_0;
      const float d = signed_absmax(x) / (five ? -16.0f : -8.0f), id = d != 0 ? 1.0f / d : 0.0f;
      const float offset = five ? 16.5f : 8.5f;
      const int top = five ? 31 : 15;
      for (size_t j = 0; j < kValues; ++j) q[j] = std::min(top, truncate_i8(x[j] * id + offset));
      put_half(out, d);
      if (five) {
        const uint32_t qh = high_bits(q);
        std::memcpy(out + 2, &qh, 4);
      }
      pack_nibbles(q, out + (five ? 6 : 2));
      return;
    }
    case DType::q4_1:
    case DType::q5_1: {
      const bool five = t == DType::q5_1;
      float min = FLT_MAX, max = -FLT_MAX;
      for (size_t j = 0; j < kValues; ++j) {
        min = std::min(min, x[j]);
        max = std::max(max, x[j]);
      }
      const float d = (max - min) / (five ? 31.0f : 15.0f), id = d != 0 ? 1.0f / d : 0.0f;
      const int top = five ? 31 : 15;
      for (size_t j = 0; j < kValues; ++j) q[j] = std::clamp(truncate_i8((x[j] - min) * id + 0.5f), 0, top);
      put_half(out, d);
      put_half(out + 2, min);
      if (five) {
        const uint32_t qh = high_bits(q);
        std::memcpy(out + 4, &qh, 4);
      }
      pack_nibbles(q, out + (five ? 8 : 4));
      return;
    }
    case DType::mxfp4: quantize_mxfp4_block(x, out); return;
    case DType::q4_k:
    case DType::q5_k:
    case DType::q6_k: quantize_kquant_block(t, x, out); return;
    case DType::f32:
    case DType::f16:
    case DType::bf16: break;
  }
}

void quantize_row(DType t, const float* x, size_t n, uint8_t* out) {
  switch (t) {
    case DType::f32: std::memcpy(out, x, n * 4); return;
    case DType::f16:
      for (size_t i = 0; i < n; ++i) {
        const uint16_t h = f32_to_f16(x[i]);
        std::memcpy(out + 2 * i, &h, 2);
      }
      return;
    case DType::bf16:
      for (size_t i = 0; i < n; ++i) {
        const uint16_t h = f32_to_bf16(x[i]);
        std::memcpy(out + 2 * i, &h, 2);
      }
      return;
    case DType::q8_0:
    case DType::q4_0:
    case DType::q4_1:
    case DType::q5_0:
    case DType::q5_1:
    case DType::q4_k:
    case DType::q5_k:
    case DType::q6_k:
    case DType::mxfp4: {
      const auto& traits = dtype_traits(t);
      for (size_t b = 0; b < n / traits.block_values; ++b)
        quantize_block(t, x + b * traits.block_values, out + b * traits.block_bytes);
      return;
    }
  }
}

}  // namespace blocks

float block_load_as_f32(DType t, const void* base, size_t i) {
  const auto u = blocks::unpack_block(t, static_cast<const uint8_t*>(base), i / blocks::kValues);
  return blocks::unpacked_value(t, u, i % blocks::kValues);
}

void dequantize_row(DType t, const void* row, size_t n, float* out) {
  if (!dtype_is_blocked(t)) {
    for (size_t i = 0; i < n; ++i) out[i] = load_as_f32(t, row, i);
    return;
  }
  for (size_t b = 0; b < n / blocks::kValues; ++b) {
    const auto u = blocks::unpack_block(t, static_cast<const uint8_t*>(row), b);
    for (size_t j = 0; j < blocks::kValues; ++j) out[b * blocks::kValues + j] = blocks::unpacked_value(t, u, j);
  }
}

}  // namespace larql
