#include "kernels/matvec.h"

#include <algorithm>
#include <cmath>
#include <vector>
#include <cstring>
#include <numeric>
#include <stdexcept>
#include <tuple>
#include <utility>

#include "base/cpu_features.h"
#include "kernels/bf16_dot.h"
#include "kernels/matvec_tiles.h"

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
  for (size_t r = 0; r < t.nr; ++r) {
    const uint8_t* row = t.w->row_ptr(t.r0 + r);
    for (size_t j = 0; j < t.nt; ++j) {
      const size_t token = t.t0 + j;
      const int8_t* qx = t.qa->q.data() + token * t.w->cols;
      float lanes[16] = {};
      for (size_t b = 0; b < blocks; ++b) {
        const blocks::UnpackedBlock w = blocks::unpack_block(type, row, b);
        const float dx = t.qa->scale(token, b);
        const float* sx = t.qa->group_sums(token, b);
        for (size_t g = 0; g < 8; ++g) {
          int p = 0;
          for (size_t i = 4 * g; i < 4 * g + 4; ++i) p += int(w.q[i]) * int(qx[b * 32 + i]);
          float& lane = lanes[8 * (b % 2) + g];
          lane = std::fma(w.scale[g] * dx, float(p), lane);
          if (blocks::has_min(type)) lane = std::fma(w.min[g] * dx, sx[g], lane);
        }
      }
      t.y[token * t.w->rows + t.r0 + r] = reduce16(lanes);
    }
  }
}

}  // namespace

void RangeArithmetic::add(const Matrix& m) {
  if (!m.data) return;
  bf16_dot = bf16_dot || m.effective_arithmetic() == Arithmetic::bf16_dot;
  q8k = q8k || blocks::is_kquant(m.dtype);
}

std::string RangeArithmetic::name() const {
  if (!bf16_dot && !q8k) return "f32";
  return bf16_dot && q8k ? "bf16-dot+q8k" : bf16_dot ? "bf16-dot" : "q8k";
}

std::optional<RangeArithmetic> RangeArithmetic::from_name(std::string_view name) {
  for (bool bf16 : {false, true})
    for (bool k : {false, true})
      if (RangeArithmetic a{bf16, k}; a.name() == name) return a;
  return std::nullopt;
}

MatmulIsa best_matmul_isa() {
  static const MatmulIsa isa = !cpu_has_avx2_fma_f16c() ? MatmulIsa::scalar
                               : !cpu_has_avx512f_bw()   ? MatmulIsa::avx2
                               : cpu_has_avx512_bf16()   ? MatmulIsa::avx512bf16
                                                         : MatmulIsa::avx512;
  return isa;
}

namespace {

// The tile function for a product and the largest tile it takes.
struct TilePlan {
  void (*tile)(const Tile&);
  size_t max_rows, max_tokens;
};

// Decode one row at a time on the 256-bit tile (cpu_prefers_one_row_q8_0_decode): where the
// default dispatch asks for it, one token's product of a q8_0 matrix, on AVX2 and AVX-512
// ISAs alike. (The K-quants' decode takes the 256-bit one-row tile on every x86 ISA.)
bool decode_one_row(const Matrix& w, size_t n) { return n == 1 && w.dtype == DType::q8_0; }

TilePlan plan_tiles(MatmulIsa isa, const Matrix& w, size_t n, bool tuned) {
  const bool kquant = blocks::is_kquant(w.dtype), blocked = dtype_is_blocked(w.dtype);
  const bool bf16_dot = w.effective_arithmetic() == Arithmetic::bf16_dot;
  // The K-quants (kquant_dot.h) read one row at a time, each super-block unpacked once for
  // the tile's tokens.
  TilePlan plan{kquant ? kquant_tile_scalar : blocked ? block_tile_scalar : bf16_dot ? bf16dot_tile_scalar : tile_scalar, 4, 4};
#if defined(__x86_64__)
  static const bool vnni = cpu_has_avx512_vnni(), avx_vnni = cpu_has_avx_vnni();  // cpuid is slow (a VM exit): ask once
  const bool avx512 = isa == MatmulIsa::avx512 || isa == MatmulIsa::avx512bf16;
  if (kquant && isa != MatmulIsa::scalar) {
    if (avx512 && n > 1) return {vnni ? kquant_tile_avx512_vnni : kquant_tile_avx512bw, 4, 4};
    return {avx_vnni ? kquant_tile_avx2_vnni : kquant_tile_avx2, 4, n == 1 ? 1 : kKquantTileTokens};
  }
  switch (isa) {
    case MatmulIsa::scalar: break;
    case MatmulIsa::avx2:  // sixteen ymm registers hold fewer accumulators
      plan = {blocked ? (avx_vnni ? block_tile_avx2_vnni : block_tile_avx2) : bf16_dot ? bf16dot_tile_avx2 : tile_avx2,
              tuned && decode_one_row(w, n) ? 1u : 4u, n == 1 ? 1 : kGridTokens};
      break;
    case MatmulIsa::avx512:
    case MatmulIsa::avx512bf16:
      // Six rows by four tokens where 24 accumulators leave registers for the operands:
      // each chunk of a token, read from L2, meets six rows in L1. The block formats'
      // and the emulated bf16-dot tiles need more temporaries and take four.
      if (tuned && decode_one_row(w, n)) plan = {avx_vnni ? block_tile_avx2_vnni : block_tile_avx2, 1, 1};
      else if (blocked) plan = {vnni ? block_tile_vnni : block_tile_avx512bw, n == 1 ? 8u : 4u, 4};
      else if (bf16_dot && isa == MatmulIsa::avx512bf16) plan = {bf16dot_tile_avx512bf16, n == 1 ? 8u : 6u, 4};
      else if (bf16_dot) plan = {bf16dot_tile_avx512, n == 1 ? 8u : 4u, 4};
      else plan = {tile_avx512, n == 1 ? 8u : 6u, 4};
      break;
  }
#else
  (void)isa, (void)n, (void)tuned;
#endif
  return plan;
}

// Bytes of one token's activations as the tiles read them.
size_t activation_bytes(const Matrix& w) {
  if (dtype_is_blocked(w.dtype)) return w.cols;  // 8-bit integers (plus a little per block)
  if (w.effective_arithmetic() == Arithmetic::bf16_dot) return 2 * bf16dot::padded(w.cols);
  return 4 * w.cols;
}

// Tokens are taken in blocks whose activations fit in a core's L2 beside a tile's rows, so
// that every row of a thread's range reads them from there; the rows are read once per block.
constexpr size_t kActivationBlockBytes = 512 << 10;

// Products of several tokens split each token block's rows into this many pieces per
// thread, claimed in order as threads come free: a thread that finishes a block goes on to
// the next one's pieces, and only the last block's last pieces can leave a thread waiting.
// In a VM one core can also run slower for a while; small pieces let the other take over
// its share (docs/benchmarks/history.md). A decode step keeps one piece per thread, one weight
// stream each (four measured slower).
constexpr size_t kPrefillPiecesPerThread = 16;

// Prefill: the last this many tiles over a row group in a token block prefetch the next
// group's rows, a part each (Tile::prefetch). With fewer, the prefetches queue on DRAM as
// the next group's first tile would; spread over every tile, the lines leave L1 before
// they are used. Two, four and eight measured 1.02-1.13, 1.08-1.22 and 1.07-1.20x faster
// products from DRAM than before (docs/benchmarks/history.md, "Prefill tiles prefetch the next row group").
constexpr size_t kPrefetchingTiles = 4;

// Part `part` of `parts` of the cache lines of rows [begin, end) of w.
std::pair<const uint8_t*, size_t> lines_part(const Matrix& w, size_t begin, size_t end, size_t part, size_t parts) {
  const uintptr_t first = reinterpret_cast<uintptr_t>(w.row_ptr(begin)) / 64;
  const size_t lines = (reinterpret_cast<uintptr_t>(w.row_ptr(end)) + 63) / 64 - first;
  const size_t from = part * lines / parts, to = (part + 1) * lines / parts;
  return {reinterpret_cast<const uint8_t*>((first + from) * 64), to - from};
}

// One product's share of a job: its tiles, token blocks and row pieces.
struct Schedule {
  Product product;
  TilePlan plan;
  size_t block_tokens, pieces, piece_rows;  // pieces per token block
  size_t first, count;                      // its first piece's number in the job, and its pieces
};

Schedule schedule(MatmulIsa isa, bool tuned, Product p, size_t n, size_t threads, size_t first) {
  const Matrix& w = *p.w;
  const TilePlan plan = plan_tiles(isa, w, n, tuned);
  const size_t block_tokens =
      std::max<size_t>(1, kActivationBlockBytes / activation_bytes(w) / plan.max_tokens) * plan.max_tokens;
  // A piece's rows: whole tiles, and whole cache lines of each token's outputs (16 floats),
  // so that no two threads write one line.
  const size_t pieces_per_block = threads * (n == 1 ? 1 : kPrefillPiecesPerThread);
  const size_t grain = std::lcm<size_t>(16, plan.max_rows);
  const size_t piece_rows = ((w.rows + pieces_per_block - 1) / pieces_per_block + grain - 1) / grain * grain;
  const size_t pieces = (w.rows + piece_rows - 1) / piece_rows;
  return {p, plan, block_tokens, pieces, piece_rows, first, (n + block_tokens - 1) / block_tokens * pieces};
}

// Piece `piece` of a product: the rows of one part for the tokens of one block.
void run_piece(const Schedule& s, size_t piece, size_t n, Tile& t) {
  const Matrix& w = *s.product.w;
  const TilePlan& plan = s.plan;
  t.w = &w, t.y = s.product.y;
  const size_t block = piece / s.pieces, part = piece % s.pieces;
  const size_t b0 = block * s.block_tokens, b1 = std::min(n, b0 + s.block_tokens);
  const size_t r_end = std::min(w.rows, (part + 1) * s.piece_rows);
  const size_t tiles = (b1 - b0 + plan.max_tokens - 1) / plan.max_tokens;
  const size_t prefetching = n > 1 ? std::min(tiles, kPrefetchingTiles) : 0;
  for (t.r0 = part * s.piece_rows; t.r0 < r_end; t.r0 += plan.max_rows) {
    t.nr = std::min(plan.max_rows, r_end - t.r0);
    // The piece's next row group, if any: another piece's rows are another thread's.
    const size_t next = t.r0 + t.nr, next_end = std::min(r_end, next + plan.max_rows);
    for (size_t i = 0; i < tiles; ++i) {
      t.t0 = b0 + i * plan.max_tokens;
      t.nt = std::min(plan.max_tokens, b1 - t.t0);
      t.unpack_rows = i == 0;
      t.block_tokens = b1 - b0;
      t.prefetch_lines = 0;
      if (next < next_end && i + prefetching >= tiles)
        std::tie(t.prefetch, t.prefetch_lines) = lines_part(w, next, next_end, i + prefetching - tiles, prefetching);
      plan.tile(t);
    }
  }
}

// The products, each with its tiles; `tuned`: the default dispatch, which may take another
// ISA's tile where this CPU runs it faster (the same bits either way).
void each_with(MatmulIsa isa, bool tuned, std::span<const InputProduct> products, ThreadPool& pool) {
  if (products.empty()) return;
  // Each distinct input in the forms the tiles read, once for all the products that take
  // it: quantised by blocks of 32 for the 32-value block formats (block_dot.h) and by
  // super-blocks for the K-quants (kquant_dot.h; an input of both kinds takes both), rounded
  // to bf16 for the bf16-dot arithmetic (bf16_dot.h). Kept across calls (their buffers' capacity is reused).
  thread_local std::vector<QuantizedActivations> quantized;
  thread_local std::vector<SuperBlockActivations> super_blocks;
  thread_local std::vector<bf16dot::RoundedActivations> rounded;
  struct Input {
    const float* x;
    size_t n, cols;
    int quantized = -1, super_blocks = -1, rounded = -1;  // its forms, by index (the vectors may grow meanwhile)
    Tile base;
  };
  thread_local std::vector<Input> inputs;
  thread_local std::vector<size_t> input_of;  // per product
  inputs.clear();
  input_of.clear();
  size_t quantized_used = 0, super_blocks_used = 0, rounded_used = 0;
  for (const InputProduct& p : products) {
    size_t i = 0;
    while (i < inputs.size() && !(inputs[i].x == p.x && inputs[i].n == p.n && inputs[i].cols == p.w->cols)) ++i;
    if (i == inputs.size()) inputs.push_back({p.x, p.n, p.w->cols, -1, -1, -1, Tile{nullptr, p.x, nullptr, 0, 0, 0, 0}});
    input_of.push_back(i);
    Input& in = inputs[i];
    if (blocks::is_kquant(p.w->dtype)) {
      if (in.super_blocks < 0) {
        if (super_blocks.size() <= super_blocks_used) super_blocks.resize(super_blocks_used + 1);
        super_blocks[super_blocks_used].quantize(p.x, p.n, p.w->cols, isa != MatmulIsa::scalar, pool);
        in.super_blocks = int(super_blocks_used++);
      }
    } else if (dtype_is_blocked(p.w->dtype) && in.quantized < 0) {
      if (quantized.size() <= quantized_used) quantized.resize(quantized_used + 1);
      quantized[quantized_used].quantize(p.x, p.n, p.w->cols, isa != MatmulIsa::scalar, pool);
      in.quantized = int(quantized_used++);
    } else if (!dtype_is_blocked(p.w->dtype) && p.w->effective_arithmetic() == Arithmetic::bf16_dot && in.rounded < 0) {
      if (rounded.size() <= rounded_used) rounded.resize(rounded_used + 1);
      rounded[rounded_used].round(p.x, p.n, p.w->cols, isa, pool);
      in.rounded = int(rounded_used++);
    }
  }
  for (Input& in : inputs) {
    if (in.quantized >= 0) in.base.qa = &quantized[size_t(in.quantized)];
    if (in.super_blocks >= 0) in.base.qk = &super_blocks[size_t(in.super_blocks)];
    if (in.rounded >= 0) in.base.xb = &rounded[size_t(in.rounded)];
  }
  // The products' pieces, numbered one product after another: one job.
  thread_local std::vector<Schedule> schedules;
  schedules.clear();
  size_t total = 0, work = 0;
  for (const InputProduct& p : products) {
    schedules.push_back(schedule(isa, tuned, Product{p.w, p.y}, p.n, pool.size(), total));
    total += schedules.back().count;
    work += p.w->rows * p.w->cols * p.n;
  }
  const auto& sched = schedules;
  const auto& ins = inputs;
  const auto& which = input_of;
  auto run = [&](size_t begin, size_t end) {
    // Block-format rows, unpacked by the first tile over them in a token block, serve the
    // block's other tiles (Tile::unpacked_rows).
    thread_local std::vector<uint8_t> unpacked;
    const bool avx512 = isa == MatmulIsa::avx512 || isa == MatmulIsa::avx512bf16;
    auto unpacked_bytes = [&](const Matrix& w, size_t max_rows) -> size_t {
      if (avx512 && blocks::is_kquant(w.dtype)) return max_rows * KquantRows::bytes(w.cols);
      if (avx512) return keeps_unpacked_rows(w.dtype) ? max_rows * UnpackedRow::bytes(w.cols) : 0;
      return isa == MatmulIsa::avx2 && dtype_is_blocked(w.dtype) && !blocks::is_kquant(w.dtype) ? QuadRows::bytes(w.cols) : 0;
    };
    size_t s = std::upper_bound(sched.begin(), sched.end(), begin, [](size_t piece, const Schedule& x) { return piece < x.first; }) -
               sched.begin() - 1;
    for (size_t piece = begin; piece < end; ++piece) {
      while (s + 1 < sched.size() && piece >= sched[s + 1].first) ++s;
      const Matrix& w = *sched[s].product.w;
      const Input& in = ins[which[s]];
      Tile t = in.base;
      t.unpacked_rows = nullptr;
      if (const size_t bytes = in.n > 1 ? unpacked_bytes(w, sched[s].plan.max_rows) : 0; bytes > 0) {
        unpacked.resize(std::max(unpacked.size(), bytes));
        t.unpacked_rows = unpacked.data();
      }
      run_piece(sched[s], piece - sched[s].first, in.n, t);
    }
  };
  // Small products are not worth waking the workers for.
  if (work < (1u << 15))
    run(0, total);
  else
    pool.parallel_for(total, run, 1, (total + pool.size() - 1) / pool.size());
}

// The products of one input as products each with its input.
std::span<const InputProduct> of_one_input(std::span<const Product> products, const float* x, size_t n) {
  thread_local std::vector<InputProduct> each;
  each.clear();
  if (products.empty()) return each;
  const size_t cols = products.front().w->cols;
  for (const Product& p : products)
    if (p.w->cols != cols) throw std::invalid_argument("matmul_shared_input: products of one input need one width");
  for (const Product& p : products) each.push_back({p.w, x, n, p.y});
  return each;
}

// Whether the default dispatch decodes q8_0 one row at a time (asked once: cpuid is slow).
bool tuned_for_this_cpu() {
  static const bool tuned = cpu_prefers_one_row_q8_0_decode();
  return tuned;
}

}  // namespace

void matmul_each_with(MatmulIsa isa, std::span<const InputProduct> products, ThreadPool& pool) {
  each_with(isa, false, products, pool);
}

void matmul_each(std::span<const InputProduct> products, ThreadPool& pool) {
  each_with(best_matmul_isa(), tuned_for_this_cpu(), products, pool);
}

void matmul_shared_input_with(MatmulIsa isa, std::span<const Product> products, const float* x, size_t n, ThreadPool& pool) {
  each_with(isa, false, of_one_input(products, x, n), pool);
}

void matmul_shared_input(std::span<const Product> products, const float* x, size_t n, ThreadPool& pool) {
  each_with(best_matmul_isa(), tuned_for_this_cpu(), of_one_input(products, x, n), pool);
}

void matmul_with(MatmulIsa isa, const Matrix& w, const float* x, size_t n, float* y, ThreadPool& pool) {
  const Product p{&w, y};
  matmul_shared_input_with(isa, {&p, 1}, x, n, pool);
}

void matmul(const Matrix& w, const float* x, size_t n, float* y, ThreadPool& pool) {
  const Product p{&w, y};
  matmul_shared_input({&p, 1}, x, n, pool);
}

}  // namespace larql
