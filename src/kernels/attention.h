// Attention's two loops over the positions a query sees, for the query heads that share a
// key-value head: the scores q·k, and the weighted sum of the values. Every ISA gives the
// same bits (the scalar versions spell the arithmetic out); prefill and decode call the
// same functions, so a prompt's positions come out as they would one token at a time.
#pragma once

#include <cstddef>

#include "kernels/matvec.h"

namespace larql {

// Rows of floats inside a wider buffer: row r starts at data + r · stride.
struct StridedRows {
  const float* data;
  size_t count, stride;
  const float* row(size_t r) const { return data + r * stride; }
};

// One key-value head's keys as key_scores reads them: positions in blocks of kKeyBlock,
// each block dimension by dimension, so that one vector holds one dimension of sixteen
// positions and a score needs no sum across lanes. Value d of position p of a head of n
// dimensions is at key_offset(p, d, n); a cache of P positions takes key_floats(P, n).
inline constexpr size_t kKeyBlock = 16;
inline size_t key_offset(size_t p, size_t d, size_t n) { return p / kKeyBlock * kKeyBlock * n + d * kKeyBlock + p % kKeyBlock; }
inline size_t key_floats(size_t positions, size_t n) { return (positions + kKeyBlock - 1) / kKeyBlock * kKeyBlock * n; }

// out[j · out_stride + p − first] = (q_j · k_p) · scale for the queries j and the positions
// p in [first, end) of `keys` (key_offset's layout): s = fma(q_j[d], k_p[d], s) for d from 0
// in increasing order, s starting at zero, then one rounded product s · scale (attention's
// 1/√d, applied as the scores are stored rather than in a pass of its own). Each block of
// keys is read once for all the queries.
void key_scores(StridedRows queries, const float* keys, size_t n, size_t first, size_t end, float scale, float* out, size_t out_stride);
void key_scores_with(MatmulIsa isa, StridedRows queries, const float* keys, size_t n, size_t first, size_t end, float scale, float* out,
                     size_t out_stride);

// out[j · n + i] = Σ_r weights.row(j)[r] · values.row(r)[i] for i < n and r < values.count:
// s = fma(w[r], v[r][i], s) from zero in increasing r, the same bits on every ISA
// (attention's weighted sums of values, one per head that shares them). With `accumulate`
// s starts at out's value instead, so that values in several runs (a tree of drafts'
// ancestors after the cache's positions) give the bits of one call over them in order.
void weighted_sum(StridedRows weights, StridedRows values, size_t n, float* out, bool accumulate = false);
void weighted_sum_with(MatmulIsa isa, StridedRows weights, StridedRows values, size_t n, float* out, bool accumulate = false);

}  // namespace larql
