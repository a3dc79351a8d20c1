// GGML's block formats against their definition, on blocks built by hand: the layout of
// each part (scale, minimum, high bits, nibbles) and the value formula, and the
// reference quantiser's choices of scale and rounding.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/block_formats.h"

namespace larql {
namespace {

void put_half(std::vector<uint8_t>& b, size_t at, float v) {
  const uint16_t h = wire::f32_to_f16(v);
  std::memcpy(&b[at], &h, 2);
}

// Quantised integer j of a block whose nibbles count up: j % 16 in the low nibble of
// byte j, 15 - j % 16 in the high one.
int nibble_of(size_t j) { return j < 16 ? int(j) : 15 - int(j - 16); }

std::vector<uint8_t> counting_nibbles() {
  std::vector<uint8_t> qs(16);
  for (size_t j = 0; j < 16; ++j) qs[j] = uint8_t(nibble_of(j) | nibble_of(j + 16) << 4);
  return qs;
}

TEST(BlockFormats, TableMatchesGgml) {
  // ggml.h's enum ggml_type and sizeof(block_*) in ggml-common.h.
  EXPECT_EQ(dtype_traits(DType::q8_0).ggml_type, 8u);
  EXPECT_EQ(dtype_traits(DType::q4_0).ggml_type, 2u);
  EXPECT_EQ(dtype_traits(DType::q4_1).ggml_type, 3u);
  EXPECT_EQ(dtype_traits(DType::q5_0).ggml_type, 6u);
  EXPECT_EQ(dtype_traits(DType::q5_1).ggml_type, 7u);
  EXPECT_EQ(dtype_traits(DType::bf16).ggml_type, 30u);
  EXPECT_EQ(dtype_bytes(DType::q8_0, 64), 68u);
  EXPECT_EQ(dtype_bytes(DType::q4_0, 32), 18u);
  EXPECT_EQ(dtype_bytes(DType::q4_1, 32), 20u);
  EXPECT_EQ(dtype_bytes(DType::q5_0, 32), 22u);
  EXPECT_EQ(dtype_bytes(DType::q5_1, 32), 24u);
  EXPECT_EQ(dtype_from_ggml(30), DType::bf16);
  EXPECT_FALSE(dtype_from_ggml(12).has_value());  // Q4_K: the next issue
}

TEST(BlockFormats, Q8_0IsScaleTimesSignedByte) {
  std::vector<uint8_t> b(34);
  put_half(b, 0, 0.25f);
  for (size_t j = 0; j < 32; ++j) b[2 + j] = uint8_t(int8_t(int(j) * 8 - 128));
  for (size_t j = 0; j < 32; ++j) EXPECT_EQ(load_as_f32(DType::q8_0, b.data(), j), 0.25f * float(int(j) * 8 - 128)) << j;
}

TEST(BlockFormats, Q4_0AndQ4_1ReadLowNibblesThenHighNibbles) {
  const auto qs = counting_nibbles();
  std::vector<uint8_t> q40(18), q41(20);
  put_half(q40, 0, 0.5f);
  std::memcpy(&q40[2], qs.data(), 16);
  put_half(q41, 0, 0.5f);
  put_half(q41, 2, -3.0f);
  std::memcpy(&q41[4], qs.data(), 16);
  for (size_t j = 0; j < 32; ++j) {
    EXPECT_EQ(load_as_f32(DType::q4_0, q40.data(), j), 0.5f * float(nibble_of(j) - 8)) << j;
    EXPECT_EQ(load_as_f32(DType::q4_1, q41.data(), j), 0.5f * float(nibble_of(j)) - 3.0f) << j;
  }
}

TEST(BlockFormats, Q5TakesBitJOfQhAsTheFifthBit) {
  const auto qs = counting_nibbles();
  const uint32_t qh = 0xA5C3'0F81u;  // bit j is the high bit of value j
  std::vector<uint8_t> q50(22), q51(24);
  put_half(q50, 0, 0.125f);
  std::memcpy(&q50[2], &qh, 4);
  std::memcpy(&q50[6], qs.data(), 16);
  put_half(q51, 0, 0.125f);
  put_half(q51, 2, 1.5f);
  std::memcpy(&q51[4], &qh, 4);
  std::memcpy(&q51[8], qs.data(), 16);
  for (size_t j = 0; j < 32; ++j) {
    const int q = nibble_of(j) + int((qh >> j) & 1) * 16;
    EXPECT_EQ(load_as_f32(DType::q5_0, q50.data(), j), 0.125f * float(q - 16)) << j;
    EXPECT_EQ(load_as_f32(DType::q5_1, q51.data(), j), 0.125f * float(q) + 1.5f) << j;
  }
}

TEST(BlockFormats, BlocksFollowOneAnotherInARow) {
  std::vector<uint8_t> row(68);
  put_half(row, 0, 1.0f);
  put_half(row, 34, 2.0f);
  row[2 + 5] = 3;
  row[34 + 2 + 5] = 3;
  EXPECT_EQ(load_as_f32(DType::q8_0, row.data(), 5), 3.0f);
  EXPECT_EQ(load_as_f32(DType::q8_0, row.data(), 37), 6.0f);
}

TEST(BlockFormats, ReferenceQuantiserChoosesGgmlScales) {
  std::vector<float> x(32);
  for (size_t j = 0; j < 32; ++j) x[j] = float(int(j) - 20) * 0.1f;  // -2.0 .. 1.1
  std::vector<uint8_t> b(34);
  blocks::quantize_block(DType::q8_0, x.data(), b.data());
  EXPECT_EQ(blocks::half_at(b.data()), wire::f16_to_f32(wire::f32_to_f16(2.0f / 127)));  // max |x| / 127
  EXPECT_EQ(int8_t(b[2]), -127);
  // q4_0: the signed value of largest magnitude maps to -8.
  std::vector<uint8_t> q4(18);
  blocks::quantize_block(DType::q4_0, x.data(), q4.data());
  EXPECT_EQ(blocks::half_at(q4.data()), wire::f16_to_f32(wire::f32_to_f16(-2.0f / -8)));
  EXPECT_EQ(load_as_f32(DType::q4_0, q4.data(), 0), -2.0f);
  // q4_1: the minimum is stored, the maximum is reached within a step.
  std::vector<uint8_t> q41(20);
  blocks::quantize_block(DType::q4_1, x.data(), q41.data());
  EXPECT_EQ(blocks::half_at(q41.data() + 2), -2.0f);
  EXPECT_NEAR(load_as_f32(DType::q4_1, q41.data(), 31), 1.1f, 3.1f / 15);
  // Every format reproduces the block within half a quantisation step (plus f16 rounding).
  for (DType t : {DType::q8_0, DType::q4_0, DType::q4_1, DType::q5_0, DType::q5_1}) {
    std::vector<uint8_t> out(dtype_bytes(t, 32));
    blocks::quantize_block(t, x.data(), out.data());
    const double levels = t == DType::q8_0 ? 254 : (t == DType::q4_0 || t == DType::q4_1) ? 15 : 31;
    for (size_t j = 0; j < 32; ++j)
      EXPECT_NEAR(load_as_f32(t, out.data(), j), x[j], 3.1 / levels * 0.51 + 0.01) << dtype_name(t) << " value " << j;
  }
}

TEST(BlockFormats, AllZeroBlockStaysZero) {
  const std::vector<float> zeros(32, 0.0f);
  for (DType t : {DType::q8_0, DType::q4_0, DType::q4_1, DType::q5_0, DType::q5_1}) {
    std::vector<uint8_t> out(dtype_bytes(t, 32));
    blocks::quantize_block(t, zeros.data(), out.data());
    for (size_t j = 0; j < 32; ++j) EXPECT_EQ(load_as_f32(t, out.data(), j), 0.0f) << dtype_name(t);
  }
}

}  // namespace
}  // namespace larql
