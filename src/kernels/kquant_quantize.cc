// GGML's reference quantisers for the K-quants (ggml-quants.c: quantize_row_q4_K_ref,
// _q5_K_ref, _q6_K_ref without an importance matrix), step for step, so that a file
// larql writes holds what llama-quantize would write. Each block's scale (and minimum)
// is chosen by a least-squares search over candidate scales, not a plain max/min:
// q4_k/q5_k by make_qkx2_quants (weighted, with a minimum), q6_k by make_qx_quants
// (symmetric, weighted by x²); then the super-block quantises those scales to 6 or 8 bits
// and the values are rounded again against the scales as stored.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/block_formats.h"

namespace larql::blocks {
namespace {

constexpr float kGroupMaxEps = 1e-15f;  // GGML's GROUP_MAX_EPS: below it a group is zero

// GGML's nearest_int: round half to even through the float unit (|v| < 2^22).
int nearest_int(float v) {
  const float shifted = v + 12582912.0f;
  int32_t bits;
  std::memcpy(&bits, &shifted, 4);
  return (bits & 0x007fffff) - 0x00400000;
}

void put_half(uint8_t* p, float v) {
  const uint16_t h = f32_to_f16(v);
  std::memcpy(p, &h, 2);
}

// make_qkx2_quants: levels 0..nmax for x ≈ scale · L − the_min, minimising the weighted
// squared error over nstep + 1 candidate scales around nmax / (max − min). Returns the
// scale; the_min is the (non-negative) amount subtracted.
float fit_scale_and_min(int n, int nmax, const float* x, const float* weights, uint8_t* L, float* the_min, float rmin,
                        float rdelta, int nstep) {
  float min = x[0], max = x[0], sum_w = weights[0], sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    min = std::min(min, x[i]);
    max = std::max(max, x[i]);
    sum_w += weights[i];
    sum_x += weights[i] * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    std::fill(L, L + n, 0);
    *the_min = -min;
    return 0.0f;
  }
  float iscale = float(nmax) / (max - min);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    L[i] = uint8_t(std::clamp(nearest_int(iscale * (x[i] - min)), 0, nmax));
    const float diff = scale * L[i] + min - x[i];
    best_error += weights[i] * (diff * diff);
  }
  uint8_t candidate[32];
  for (int step = 0; step <= nstep; ++step) {
    iscale = (rmin + rdelta * float(step) + float(nmax)) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::clamp(nearest_int(iscale * (x[i] - min)), 0, nmax);
      candidate[i] = uint8_t(l);
      const float w = weights[i];
      sum_l += w * float(l);
      sum_l2 += w * float(l) * float(l);
      sum_xl += w * float(l) * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D <= 0) continue;
    float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
    float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
    if (this_min > 0) {
      this_min = 0;
      this_scale = sum_xl / sum_l2;
    }
    float error = 0;
    for (int i = 0; i < n; ++i) {
      const float diff = this_scale * candidate[i] + this_min - x[i];
      error += weights[i] * (diff * diff);
    }
    if (error < best_error) {
      std::copy(candidate, candidate + n, L);
      best_error = error;
      scale = this_scale;
      min = this_min;
    }
  }
  *the_min = -min;
  return scale;
}

// make_qx_quants with rmse_type 1: a symmetric scale for levels −nmax..nmax−1, the value
// of largest magnitude mapped to −nmax, then 18 nearby scales tried, each fitted by least
// squares weighted by x². L gets the chosen levels + nmax (all 0 for a zero group).
float fit_symmetric_scale(int n, int nmax, const float* x, uint8_t* L) {
  float max = 0, amax = 0;
  for (int i = 0; i < n; ++i)
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  if (amax < kGroupMaxEps) {
    std::fill(L, L + n, 0);
    return 0.0f;
  }
  auto level = [&](float iscale, int i) { return std::clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1); };
  auto fit = [&](float iscale, float& sumlx, float& suml2) {
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      const int l = level(iscale, i);
      const float w = x[i] * x[i];
      sumlx += w * x[i] * float(l);
      suml2 += w * float(l) * float(l);
    }
  };
  auto keep_levels = [&](float iscale) {
    for (int i = 0; i < n; ++i) L[i] = uint8_t(level(iscale, i) + nmax);
  };
  float sumlx, suml2;
  fit(-float(nmax) / max, sumlx, suml2);
  keep_levels(-float(nmax) / max);
  float scale = suml2 != 0 ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int step = -9; step <= 9; ++step) {
    if (step == 0) continue;
    const float iscale = -(float(nmax) + 0.1f * float(step)) / max;
    fit(iscale, sumlx, suml2);
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      keep_levels(iscale);
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// q4_k (nmax 15) and q5_k (nmax 31).
template <DType T>
void quantize_q45_k(const float* x, uint8_t* out) {
  constexpr KLayout kL = k_layout<T>();
  constexpr int kMax = T == DType::q4_k ? 15 : 31;
  std::memset(out, 0, dtype_traits(T).block_bytes);
  uint8_t L[kSuperValues];
  float scales[8], mins[8], weights[32], max_scale = 0, max_min = 0;
  for (size_t k = 0; k < 8; ++k) {
    const float* v = x + 32 * k;
    float sum_x2 = 0;
    for (size_t l = 0; l < 32; ++l) sum_x2 += v[l] * v[l];
    const float av_x = std::sqrt(sum_x2 / 32);
    for (size_t l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(v[l]);
    scales[k] = T == DType::q4_k ? fit_scale_and_min(32, kMax, v, weights, L + 32 * k, &mins[k], -1.0f, 0.1f, 20)
                                 : fit_scale_and_min(32, kMax, v, weights, L + 32 * k, &mins[k], -0.5f, 0.1f, 15);
    max_scale = std::max(max_scale, scales[k]);
    max_min = std::max(max_min, mins[k]);
  }
  const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f, inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
  uint8_t* packed = out + kL.scales;
  for (size_t k = 0; k < 8; ++k) {
    const uint8_t ls = uint8_t(std::min(63, nearest_int(inv_scale * scales[k])));
    const uint8_t lm = uint8_t(std::min(63, nearest_int(inv_min * mins[k])));
    if (k < 4) {
      packed[k] = ls;
      packed[k + 4] = lm;
    } else {
      packed[k + 4] = uint8_t((ls & 0x0F) | (lm & 0x0F) << 4);
      packed[k - 4] |= uint8_t((ls >> 4) << 6);
      packed[k] |= uint8_t((lm >> 4) << 6);
    }
  }
  put_half(out, max_scale / 63.0f);
  put_half(out + 2, max_min / 63.0f);
  // Round again against the scales as stored.
  uint8_t sm[16];
  unpack_scales_mins(packed, sm);
  for (size_t k = 0; k < 8; ++k) {
    const float d = half_at(out) * float(sm[k]);
    if (d == 0) continue;
    const float dm = half_at(out + 2) * float(sm[8 + k]);
    for (size_t j = 0; j < 32; ++j) L[32 * k + j] = uint8_t(std::clamp(nearest_int((x[32 * k + j] + dm) / d), 0, kMax));
  }
  for (size_t k = 0; k < 8; ++k)
    for (size_t j = 0; j < 32; ++j) {
      const uint8_t l = L[32 * k + j];
      out[kL.qs + 32 * (k / 2) + j] |= uint8_t((l & 0x0F) << (k % 2 == 0 ? 0 : 4));
      if constexpr (kL.qh != 0) out[kL.qh + j] |= uint8_t((l >> 4) << k);
    }
}

void quantize_q6_k(const float* x, uint8_t* out) {
  std::memset(out, 0, dtype_traits(DType::q6_k).block_bytes);
  uint8_t L[kSuperValues];  // stored levels 0..63 (value + 32)
  float scales[16], max_scale = 0, max_abs_scale = 0;
  for (size_t s = 0; s < 16; ++s) {
    scales[s] = fit_symmetric_scale(16, 32, x + 16 * s, L + 16 * s);
    if (std::fabs(scales[s]) > max_abs_scale) {
      max_abs_scale = std::fabs(scales[s]);
      max_scale = scales[s];
    }
  }
  if (max_abs_scale < kGroupMaxEps) return;  // all zero
  const float iscale = -128.0f / max_scale;
  put_half(out + Q6Layout::d, 1 / iscale);
  for (size_t s = 0; s < 16; ++s) out[Q6Layout::scales + s] = uint8_t(int8_t(std::min(127, nearest_int(iscale * scales[s]))));
  for (size_t s = 0; s < 16; ++s) {
    const float d = half_at(out + Q6Layout::d) * float(int8_t(out[Q6Layout::scales + s]));
    if (d == 0) continue;
    for (size_t j = 0; j < 16; ++j) L[16 * s + j] = uint8_t(std::clamp(nearest_int(x[16 * s + j] / d), -32, 31) + 32);
  }
  for (size_t k = 0; k < 8; ++k) {
    const size_t half = k / 4, i = k % 4;
    for (size_t j = 0; j < 32; ++j) {
      const uint8_t l = L[32 * k + j];
      out[Q6Layout::ql + 64 * half + 32 * (i % 2) + j] |= uint8_t((l & 0x0F) << (i < 2 ? 0 : 4));
      out[Q6Layout::qh + 32 * half + j] |= uint8_t((l >> 4) << (2 * i));
    }
  }
}

}  // namespace

void quantize_kquant_block(DType t, const float* x, uint8_t* out) {
  switch (t) {
    case DType::q4_k: return quantize_q45_k<DType::q4_k>(x, out);
    case DType::q5_k: return quantize_q45_k<DType::q5_k>(x, out);
    case DType::q6_k: return quantize_q6_k(x, out);
    default: return;
  }
}

}  // namespace larql::blocks
