// GGML's block formats against their definition, on blocks built by hand: the layout of
// each part (scale, minimum, high bits, nibbles) and the value formula, and the
// reference quantisers' choices of scale and rounding. (By hand, against llama.cpp's
// libggml-base: quantize_row_q{4,5,6}_K_ref and dequantize_row_q{4,5,6}_K give the same
// bytes and floats as these on 12,000 super-blocks; docs/benchmarks/history.md.)
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "kernels/block_formats.h"

namespace larql {
namespace {

void put_half(std::vector<uint8_t>& b, size_t at, float v) {
  const uint16_t h = f32_to_f16(v);
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
  EXPECT_EQ(dtype_traits(DType::q4_k).ggml_type, 12u);
  EXPECT_EQ(dtype_traits(DType::q5_k).ggml_type, 13u);
  EXPECT_EQ(dtype_traits(DType::q6_k).ggml_type, 14u);
  EXPECT_EQ(dtype_bytes(DType::q4_k, 256), 144u);  // 2 + 2 + 12 + 128
  EXPECT_EQ(dtype_bytes(DType::q5_k, 512), 352u);  // 2 + 2 + 12 + 32 + 128, twice
  EXPECT_EQ(dtype_bytes(DType::q6_k, 256), 210u);  // 128 + 64 + 16 + 2
  EXPECT_FALSE(dtype_from_ggml(10).has_value());  // Q2_K: not supported
  EXPECT_EQ(dtype_traits(DType::mxfp4).ggml_type, 39u);
  EXPECT_EQ(dtype_bytes(DType::mxfp4, 64), 34u);  // 1 + 16, twice
}

// MXFP4: the nibbles are E2M1 codes (ggml-common.h's kvalues_mxfp4, the values doubled),
// paired j with j + 16 as q4_0's are, and the scale byte e is 2^(e−128), subnormal below 2.
TEST(BlockFormats, Mxfp4IsPowerOfTwoScaleTimesE2M1Code) {
  const float e2m1[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};  // the OCP format's magnitudes
  for (int code = 0; code < 16; ++code)
    EXPECT_EQ(blocks::kMxfp4Values[code], (code & 8 ? -2 : 2) * e2m1[code & 7]) << code;
  const auto qs = counting_nibbles();
  std::vector<uint8_t> b(17);
  std::memcpy(&b[1], qs.data(), 16);
  for (int e : {0, 1, 2, 100, 128, 130, 254, 255}) {
    b[0] = uint8_t(e);
    const float scale = std::ldexp(1.0f, e - 128);
    for (size_t j = 0; j < 32; ++j)
      ASSERT_EQ(load_as_f32(DType::mxfp4, b.data(), j), scale * float(blocks::kMxfp4Values[nibble_of(j)])) << e << " " << j;
  }
}

// GGML's quantize_row_mxfp4_ref: e from the largest magnitude's exponent, then each value
// the nearest code, the first one on ties.
TEST(BlockFormats, Mxfp4QuantiserChoosesGgmlsScaleAndNearestCodes) {
  std::vector<float> x(32, 0.0f);
  x[0] = 6.0f;     // amax: floor(log2 6) = 2, e = 127, scale 2^-1
  x[1] = -3.0f;    // -6 · 0.5: code 13
  x[2] = 0.5f;     // code 1
  x[3] = 0.25f;    // between codes 0 and 1: the first
  x[16] = 5.0f;    // between 8 and 12 (·0.5): 4 and 6 are 1 away each, the first: code 6
  x[17] = -100.0f / 64;  // nearest -3 · 0.5: code 11
  std::vector<uint8_t> b(17);
  blocks::quantize_block(DType::mxfp4, x.data(), b.data());
  EXPECT_EQ(b[0], 127);
  EXPECT_EQ(b[1], 7 | 6 << 4);
  EXPECT_EQ(b[2], 13 | 11 << 4);
  EXPECT_EQ(b[3], 1);
  EXPECT_EQ(b[4], 0);
  // A block below the smallest scale's reach: e clamps at 0 instead of wrapping.
  std::vector<float> tiny(32, 1e-40f);
  blocks::quantize_block(DType::mxfp4, tiny.data(), b.data());
  EXPECT_EQ(b[0], 0);
  // Every value within half a step of its scale's grid (the coarsest step, 8 to 12, is 4 · 2^(e−128)).
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0, 1);
  for (float& v : x) v = normal(rng);
  blocks::quantize_block(DType::mxfp4, x.data(), b.data());
  const float scale = blocks::e8m0_half(b[0]);
  for (size_t j = 0; j < 32; ++j) EXPECT_LE(std::fabs(load_as_f32(DType::mxfp4, b.data(), j) - x[j]), scale * 4 * 0.5f + 1e-6f) << j;
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
  EXPECT_EQ(blocks::half_at(b.data()), f16_to_f32(f32_to_f16(2.0f / 127)));  // max |x| / 127
  EXPECT_EQ(int8_t(b[2]), -127);
  // q4_0: the signed value of largest magnitude maps to -8.
  std::vector<uint8_t> q4(18);
  blocks::quantize_block(DType::q4_0, x.data(), q4.data());
  EXPECT_EQ(blocks::half_at(q4.data()), f16_to_f32(f32_to_f16(-2.0f / -8)));
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
  for (DType t : {DType::q8_0, DType::q4_0, DType::q4_1, DType::q5_0, DType::q5_1, DType::mxfp4}) {
    std::vector<uint8_t> out(dtype_bytes(t, 32));
    blocks::quantize_block(t, zeros.data(), out.data());
    for (size_t j = 0; j < 32; ++j) EXPECT_EQ(load_as_f32(t, out.data(), j), 0.0f) << dtype_name(t);
  }
}

// A q4_k/q5_k super-block's 12 scale bytes, packed as ggml-common.h documents block_q4_K:
// bytes 0-3 hold s_0..3 (low 6 bits) and the top bits of s_4..7, bytes 4-7 the same for
// the mins, bytes 8-11 the low nibbles of s_4..7 and m_4..7.
void pack_k_scales(const int* s, const int* m, uint8_t* out) {
  for (int k = 0; k < 4; ++k) {
    out[k] = uint8_t(s[k] | (s[k + 4] >> 4) << 6);
    out[k + 4] = uint8_t(m[k] | (m[k + 4] >> 4) << 6);
    out[k + 8] = uint8_t((s[k + 4] & 0x0F) | (m[k + 4] & 0x0F) << 4);
  }
}

constexpr int kScales[8] = {1, 2, 63, 17, 16, 33, 48, 5}, kMins[8] = {0, 62, 3, 1, 20, 40, 7, 63};

TEST(KQuants, Q4_KIsSuperScaleTimesSixBitScaleTimesNibbleMinusMin) {
  std::vector<uint8_t> b(144, 0);
  put_half(b, 0, 0.5f);
  put_half(b, 2, 0.25f);
  pack_k_scales(kScales, kMins, &b[4]);
  // Value j of block k: n = (j + 3k) mod 16, in the low nibbles of qs[32·(k/2) ..] for even
  // k and the high ones for odd k.
  for (int k = 0; k < 8; ++k)
    for (int j = 0; j < 32; ++j) b[16 + 32 * (k / 2) + j] |= uint8_t(((j + 3 * k) % 16) << (k % 2 ? 4 : 0));
  for (int k = 0; k < 8; ++k)
    for (int j = 0; j < 32; ++j)
      ASSERT_EQ(load_as_f32(DType::q4_k, b.data(), size_t(32 * k + j)), 0.5f * kScales[k] * ((j + 3 * k) % 16) - 0.25f * kMins[k])
          << "block " << k << " value " << j;
}

TEST(KQuants, Q5_KTakesBitKOfQhAsTheFifthBit) {
  std::vector<uint8_t> b(176, 0);
  put_half(b, 0, 0.5f);
  put_half(b, 2, -0.125f);  // a negative dmin is legal: the min is added
  pack_k_scales(kScales, kMins, &b[4]);
  auto n = [](int k, int j) { return (j * 7 + k) % 32; };
  for (int k = 0; k < 8; ++k)
    for (int j = 0; j < 32; ++j) {
      b[48 + 32 * (k / 2) + j] |= uint8_t((n(k, j) & 0x0F) << (k % 2 ? 4 : 0));
      b[16 + j] |= uint8_t((n(k, j) >> 4) << k);
    }
  for (int k = 0; k < 8; ++k)
    for (int j = 0; j < 32; ++j)
      ASSERT_EQ(load_as_f32(DType::q5_k, b.data(), size_t(32 * k + j)), 0.5f * kScales[k] * n(k, j) + 0.125f * kMins[k])
          << "block " << k << " value " << j;
}

TEST(KQuants, Q6_KHasASignedScalePerSixteenValues) {
  std::vector<uint8_t> b(210, 0);
  put_half(b, 208, 0.25f);
  int8_t scales[16];
  for (int s = 0; s < 16; ++s) scales[s] = int8_t(s % 2 ? -9 * s : 8 * s - 128);
  std::memcpy(&b[192], scales, 16);
  // Value v = 128·half + 32·i + j: six bits q = (v · 5) mod 64, the low four in ql[64·half +
  // 32·(i mod 2) + j] (low nibble for i < 2), the top two at bits 2i of qh[32·half + j].
  auto q = [](int v) { return (v * 5) % 64; };
  for (int v = 0; v < 256; ++v) {
    const int half = v / 128, i = (v % 128) / 32, j = v % 32;
    b[64 * half + 32 * (i % 2) + j] |= uint8_t((q(v) & 0x0F) << (i < 2 ? 0 : 4));
    b[128 + 32 * half + j] |= uint8_t((q(v) >> 4) << (2 * i));
  }
  for (int v = 0; v < 256; ++v) ASSERT_EQ(load_as_f32(DType::q6_k, b.data(), size_t(v)), 0.25f * scales[v / 16] * (q(v) - 32)) << v;
}

// Quantise-dequantise error of a Gaussian row, relative to its standard deviation.
double relative_rmse(DType t, const std::vector<float>& x) {
  std::vector<uint8_t> q(dtype_bytes(t, x.size()));
  blocks::quantize_row(t, x.data(), x.size(), q.data());
  std::vector<float> y(x.size());
  dequantize_row(t, q.data(), x.size(), y.data());
  double se = 0, ss = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    se += double(y[i] - x[i]) * (y[i] - x[i]);
    ss += double(x[i]) * x[i];
  }
  return std::sqrt(se / ss);
}

TEST(KQuants, QuantisationErrorIsInEachFormatsRangeAndBelowTheSimplerFormats) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0, 0.02f);
  std::vector<float> x(256 * 64);
  for (float& v : x) v = normal(rng);
  std::map<std::string, double> e;
  for (const auto& d : kDTypes)
    if (dtype_is_blocked(d.type)) e[std::string(d.name)] = relative_rmse(d.type, x);
  for (const auto& [name, error] : e) std::printf("relative rmse %-5s %.5f\n", name.c_str(), error);
  // Each extra bit halves the step: about 2^-bits of the range of a block.
  EXPECT_GT(e["q4_k"], 0.05);
  EXPECT_LT(e["q4_k"], 0.11);
  EXPECT_GT(e["q5_k"], 0.025);
  EXPECT_LT(e["q5_k"], 0.055);
  EXPECT_GT(e["q6_k"], 0.012);
  EXPECT_LT(e["q6_k"], 0.028);
  // The least-squares scales and finer minimums beat the 32-value formats of the same bits.
  EXPECT_LT(e["q4_k"], e["q4_0"]);
  EXPECT_LT(e["q4_k"], e["q4_1"]);
  EXPECT_LT(e["q5_k"], e["q5_0"]);
  EXPECT_LT(e["q5_k"], e["q5_1"]);
  EXPECT_LT(e["q6_k"], e["q5_k"]);
  EXPECT_GT(e["q6_k"], e["q8_0"]);
  // Four bits of floating point with a power-of-two scale: coarser than q4_0's integers.
  EXPECT_GT(e["mxfp4"], e["q4_0"]);
  EXPECT_LT(e["mxfp4"], 0.2);
}

TEST(KQuants, ZeroSuperBlocksAndScalesStayZero) {
  std::vector<float> x(512, 0.0f);
  for (size_t i = 256; i < 512; ++i) x[i] = i < 288 ? 0.0f : 1.0f;  // second super-block: a zero block beside ones
  for (DType t : {DType::q4_k, DType::q5_k, DType::q6_k}) {
    std::vector<uint8_t> q(dtype_bytes(t, x.size()));
    blocks::quantize_row(t, x.data(), x.size(), q.data());
    std::vector<float> y(x.size());
    dequantize_row(t, q.data(), x.size(), y.data());
    for (size_t i = 0; i < 288; ++i) ASSERT_EQ(y[i], 0.0f) << dtype_name(t) << " value " << i;
    for (size_t i = 288; i < 512; ++i) ASSERT_NEAR(y[i], 1.0f, 0.02) << dtype_name(t) << " value " << i;
  }
}

}  // namespace
}  // namespace larql
