#include "kernels/kquant_dot.h"

#include <algorithm>
#include <cmath>

#include "kernels/block_dot.h"
#include "kernels/block_formats.h"
#include "kernels/matvec_tiles.h"

namespace larql {

void quantize_super_block_row_scalar(const float* x, SuperBlockActivations& qa, size_t r) {
  for (size_t s = 0; s < qa.supers; ++s) {
    int8_t* qx = &qa.q[r * qa.cols + s * q8k::kValues];
    const float d = quantize_to_int8(x + r * qa.cols + s * q8k::kValues, q8k::kValues, qx);
    int16_t* sums = &qa.sums[(r * qa.cols + s * q8k::kValues) / q8k::kGroup];
    for (size_t g = 0; g < q8k::kValues / q8k::kGroup; ++g) {
      int sum = 0;
      for (size_t i = 0; i < q8k::kGroup; ++i) sum += qx[g * q8k::kGroup + i];
      sums[g] = int16_t(sum);
    }
    qa.scale[r * qa.supers + s] = d;
  }
}

void SuperBlockActivations::quantize(const float* x, size_t n, size_t c, bool simd, ThreadPool& pool) {
  rows = n;
  cols = c;
  supers = c / q8k::kValues;
  q.resize(n * c);
  scale.resize(n * supers);
  sums.resize(n * c / q8k::kGroup);
#if defined(__x86_64__)
  void (*row)(const float*, SuperBlockActivations&, size_t) = simd ? quantize_super_block_row_avx2 : quantize_super_block_row_scalar;
#else
  (void)simd;
  void (*row)(const float*, SuperBlockActivations&, size_t) = quantize_super_block_row_scalar;
#endif
  auto rows_of = [&](size_t begin, size_t end) {
    for (size_t r = begin; r < end; ++r) row(x, *this, r);
  };
  pool.parallel_rows(n, c, rows_of);
}

namespace {

// One row's super-block against one token's: the contract's S and M (M = 0 for q6_k).
template <DType T>
std::pair<int32_t, int32_t> super_block_integers(const uint8_t* sb, const int8_t* qx, const int16_t* b) {
  int32_t S = 0, M = 0;
  if constexpr (T == DType::q6_k) {
    for (size_t i = 0; i < 16; ++i) {
      int32_t p = 0;
      for (size_t v = 16 * i; v < 16 * i + 16; ++v) p += blocks::kquant_integer<T>(sb, v / 32, v % 32) * qx[v];  // n − 32
      S += int8_t(sb[blocks::Q6Layout::scales + i]) * p;
    }
  } else {
    uint8_t sm[16];
    blocks::unpack_scales_mins(sb + blocks::k_layout<T>().scales, sm);
    for (size_t k = 0; k < 8; ++k) {
      int32_t p = 0;
      for (size_t j = 0; j < 32; ++j) p += blocks::kquant_integer<T>(sb, k, j) * qx[32 * k + j];
      S += sm[k] * p;
      M += sm[8 + k] * (b[2 * k] + b[2 * k + 1]);
    }
  }
  return {S, M};
}

template <DType T>
void tile_scalar(const Tile& t) {
  const SuperBlockActivations& qa = *t.qk;
  const size_t supers = t.w->cols / q8k::kValues, sb_bytes = dtype_traits(T).block_bytes;
  for (size_t r = 0; r < t.nr; ++r) {
    const uint8_t* row = t.w->row_ptr(t.r0 + r);
    for (size_t j = 0; j < t.nt; ++j) {
      const size_t token = t.t0 + j;
      const int8_t* qx = qa.row_q(token);
      const int16_t* sums = qa.row_sums(token);
      float acc = 0.0f;
      for (size_t s = 0; s < supers; ++s) {
        const uint8_t* sb = row + s * sb_bytes;
        const auto [S, M] = super_block_integers<T>(sb, qx + s * q8k::kValues, sums + s * (q8k::kValues / q8k::kGroup));
        const float dx = qa.row_scales(token)[s];
        const float d = blocks::half_at(sb + (T == DType::q6_k ? blocks::Q6Layout::d : 0));
        acc = std::fma(d * dx, float(S), acc);
        if constexpr (T != DType::q6_k) acc = std::fma(-(blocks::half_at(sb + 2) * dx), float(M), acc);
      }
      t.y[token * t.w->rows + t.r0 + r] = acc;
    }
  }
}

}  // namespace

void kquant_tile_scalar(const Tile& t) {
  blocks::with_kquant_format(t.w->dtype, [&]<DType T>() { tile_scalar<T>(t); });
}

}  // namespace larql
