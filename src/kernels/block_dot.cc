#include "kernels/block_dot.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/matvec_tiles.h"
#include "kernels/thread_pool.h"

namespace larql {

void quantize_activation_row_scalar(const float* x, QuantizedActivations& qa, size_t r) {
  for (size_t b = 0; b < qa.blocks; ++b) {
    int8_t* qx = &qa.q[r * qa.cols + b * blocks::kValues];
    const float d = quantize_to_int8(x + r * qa.cols + b * blocks::kValues, blocks::kValues, qx);
    const size_t lanes = r * qa.lane_stride + 8 * b;
    for (size_t g = 0; g < 8; ++g) qa.lane_group_sum[lanes + g] = float(qx[4 * g] + qx[4 * g + 1] + qx[4 * g + 2] + qx[4 * g + 3]);
    qa.block_scale[r * qa.blocks + b] = d;
  }
}

void QuantizedActivations::quantize(const float* x, size_t n, size_t c, bool simd, ThreadPool& pool) {
  rows = n;
  cols = c;
  blocks = c / blocks::kValues;
  lane_stride = (blocks + 1) / 2 * 16;
  q.resize(n * c);
  lane_group_sum.assign(n * lane_stride, 0.0f);
  block_scale.resize(n * blocks);
#if defined(__x86_64__)
  void (*row)(const float*, QuantizedActivations&, size_t) = simd ? quantize_activation_row_avx2 : quantize_activation_row_scalar;
#else
  (void)simd;
  void (*row)(const float*, QuantizedActivations&, size_t) = quantize_activation_row_scalar;
#endif
  auto rows_of = [&](size_t begin, size_t end) {
    for (size_t r = begin; r < end; ++r) row(x, *this, r);
  };
  pool.parallel_rows(n, c, rows_of);
}

}  // namespace larql
