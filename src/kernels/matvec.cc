#include "kernels/matvec.h"

#include <cmath>
#include <cstring>

#include "kernels/matvec_tiles.h"
#include "wire/cpu_features.h"

namespace larql {
namespace {

// Scalar version of the contract: sixteen correctly rounded FMA lanes, the same tree.
void tile_scalar(const Tile& t) {
  for (size_t r = 0; r < t.nr; ++r) {
    const uint8_t* row = t.w->row_ptr(t.r0 + r);
    for (size_t j = 0; j < t.nt; ++j) {
      const float* x = t.x + (t.t0 + j) * t.w->cols;
      float lanes[16] = {};
      const size_t n = t.w->cols, padded = (n + 15) / 16 * 16;
      for (size_t k = 0; k < n; ++k) lanes[k % 16] = std::fma(load_as_f32(t.w->dtype, row, k), x[k], lanes[k % 16]);
      for (size_t k = n; k < padded; ++k) lanes[k % 16] = std::fma(0.0f, 0.0f, lanes[k % 16]);  // as the SIMD tail does
      t.y[(t.t0 + j) * t.w->rows + t.r0 + r] = reduce16(lanes);
    }
  }
}

// Scalar version of block_dot.h's contract.
void block_tile_scalar(const Tile& t) {
  const DType type = t.w->dtype;
  const size_t blocks = t.w->cols / 32;
  const bool kquant = blocks::is_kquant(type);
  for (size_t r = 0; r < t.nr; ++r) {
    const uint8_t* row = t.w->row_ptr(t.r0 + r);
    for (size_t j = 0; j < t.nt; ++j) {
      const size_t token = t.t0 + j;
      const int8_t* qx = t.qa->q.data() + token * t.w->cols;
      float lanes[16] = {};
      float k_mins[8];  // the current super-block's minimums (K-quants)
      for (size_t b = 0; b < blocks; ++b) {
        const blocks::UnpackedBlock w = blocks::unpack_block(type, row, b);
        k_mins[b % 8] = w.min[0];
        const float dx = t.qa->scale(token, b);
        const float* sx = t.qa->group_sums(token, b);
        for (size_t g = 0; g < 8; ++g) {
          int p = 0;
          for (size_t i = 4 * g; i < 4 * g + 4; ++i) p += int(w.q[i]) * int(qx[b * 32 + i]);
          float& lane = lanes[8 * (b % 2) + g];
          lane = std::fma(w.scale[g] * dx, float(p), lane);
          if (blocks::has_min(type) && !kquant) lane = std::fma(w.min[g] * dx, sx[g], lane);
        }
        // The K-quants' minimums, once per super-block after its eight blocks.
        if (blocks::has_min(type) && kquant && b % 8 == 7)
          for (size_t k = 0; k < 8; ++k) lanes[k] = std::fma(k_mins[k], t.qa->block_sums(token, b - 7)[k], lanes[k]);
      }
      t.y[token * t.w->rows + t.r0 + r] = reduce16(lanes);
    }
  }
}

}  // namespace

MatmulIsa best_matmul_isa() {
  static const MatmulIsa isa = cpu_has_avx512f_bw() && cpu_has_avx2_fma_f16c() ? MatmulIsa::avx512
                               : cpu_has_avx2_fma_f16c()                       ? MatmulIsa::avx2
                                                                               : MatmulIsa::scalar;
  return isa;
}

void matmul_with(MatmulIsa isa, const Matrix& w, const float* x, size_t n, float* y, ThreadPool& pool) {
  const bool blocked = dtype_is_blocked(w.dtype);
  void (*tile)(const Tile&) = blocked ? block_tile_scalar : tile_scalar;
  size_t max_rows = 4, max_tokens = 4;
#if defined(__x86_64__)
  static const bool vnni = cpu_has_avx512_vnni();  // cpuid is slow (a VM exit): ask once
  if (isa == MatmulIsa::avx512) {
    tile = !blocked ? tile_avx512 : vnni ? block_tile_vnni : block_tile_avx512bw;
    max_rows = n == 1 ? 8 : 4;
  } else if (isa != MatmulIsa::scalar) {
    tile = blocked ? block_tile_avx2 : tile_avx2;
    max_rows = n == 1 ? 4 : 2;  // sixteen ymm registers hold fewer accumulators
    max_tokens = 2;
  }
#endif
  // Block formats read the activations quantised (block_dot.h), once per call.
  thread_local QuantizedActivations quantized;
  if (blocked) quantized.quantize(x, n, w.cols);
  const QuantizedActivations* qa = blocked ? &quantized : nullptr;
  auto rows = [&](size_t begin, size_t end) {
    for (size_t r0 = begin; r0 < end; r0 += max_rows)
      for (size_t t0 = 0; t0 < n; t0 += max_tokens)
        tile(Tile{&w, x, y, r0, std::min(max_rows, end - r0), t0, std::min(max_tokens, n - t0), qa});
  };
  // Small products are not worth waking the workers for.
  if (w.rows * w.cols * n < (1u << 15))
    rows(0, w.rows);
  else
    pool.parallel_for(w.rows, rows, 16);
}

void matmul(const Matrix& w, const float* x, size_t n, float* y, ThreadPool& pool) {
  matmul_with(best_matmul_isa(), w, x, n, y, pool);
}

}  // namespace larql
