// Scalar kernels: the literal reading of PROTOCOL §5, used as the test oracle.
#include <cmath>
#include <cstring>
#include <optional>

#include "base/byte_io.h"
#include "base/f16.h"
#include "wire/i8_block.h"
#include "wire/kernels.h"
#include "wire/q8_block.h"

namespace larql::wire {
namespace {

bool encode_f32(const float* in, size_t n, uint8_t* out) {
  std::memcpy(out, in, n * 4);
  bool finite = true;
  for (size_t i = 0; i < n; ++i) finite &= std::isfinite(in[i]);
  return finite;
}

bool decode_f32(const uint8_t* in, size_t n, float* out) {
  std::memcpy(out, in, n * 4);
  bool finite = true;
  for (size_t i = 0; i < n; ++i) finite &= std::isfinite(out[i]);
  return finite;
}

bool encode_f16(const float* in, size_t n, uint8_t* out) {
  bool fits = true;
  for (size_t i = 0; i < n; ++i) {
    uint16_t h = f32_to_f16(in[i]);
    fits &= f16_is_finite(h);
    std::memcpy(out + 2 * i, &h, 2);
  }
  return fits;
}

bool decode_f16(const uint8_t* in, size_t n, float* out) {
  bool finite = true;
  for (size_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, in + 2 * i, 2);
    finite &= f16_is_finite(h);
    out[i] = f16_to_f32(h);
  }
  return finite;
}

// max |x| over n values; nullopt if one is NaN or ±inf (it is never sent).
std::optional<float> finite_max_abs(const float* in, size_t n) {
  float max_abs = 0.0f;
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(in[i])) return std::nullopt;
    max_abs = std::fmax(max_abs, std::fabs(in[i]));
  }
  return max_abs;
}

bool encode_i8_row(const float* in, size_t n, uint8_t* block) {
  const auto max_abs = finite_max_abs(in, n);
  if (!max_abs) return false;
  const float scale = i8_scale_for_max(*max_abs);
  if (!i8_scale_is_valid(scale)) return false;
  write_i8_block_header(block, scale);
  int8_t* q = reinterpret_cast<int8_t*>(block + kI8BlockHeaderBytes);
  for (size_t i = 0; i < n; ++i) q[i] = clamp_i8(std::round(in[i] / scale));  // ties away from zero
  return true;
}

void decode_i8_row(const uint8_t* q, size_t n, float scale, float* out) {
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<float>(static_cast<int8_t>(q[i])) * scale;
}

bool encode_q8(const float* in, size_t n, uint8_t* blocks) {
  for (size_t b = 0; b < n / kQ8BlockValues; ++b, in += kQ8BlockValues, blocks += kQ8BlockBytes) {
    const auto max_abs = finite_max_abs(in, kQ8BlockValues);
    if (!max_abs) return false;
    const uint16_t h = q8_scale_for_max(*max_abs);
    if (!f16_is_finite(h)) return false;
    std::memcpy(blocks, &h, 2);
    const float d = f16_to_f32(h);
    auto* q = reinterpret_cast<int8_t*>(blocks + 2);
    for (size_t i = 0; i < kQ8BlockValues; ++i) q[i] = d == 0.0f ? 0 : q8_quantize(in[i], d);
  }
  return true;
}

bool decode_q8(const uint8_t* blocks, size_t n, float* out) {
  for (size_t b = 0; b < n / kQ8BlockValues; ++b, blocks += kQ8BlockBytes, out += kQ8BlockValues) {
    uint16_t h;
    std::memcpy(&h, blocks, 2);
    if (!q8_scale_is_valid(h)) return false;
    const float d = f16_to_f32(h);
    for (size_t i = 0; i < kQ8BlockValues; ++i) out[i] = static_cast<float>(static_cast<int8_t>(blocks[2 + i])) * d;
  }
  return true;
}

}  // namespace

const WireKernels& scalar_kernels() {
  static const WireKernels k{"scalar",      encode_f32,    decode_f32, encode_f16, decode_f16,
                             encode_i8_row, decode_i8_row, encode_q8,  decode_q8};
  return k;
}

}  // namespace larql::wire
