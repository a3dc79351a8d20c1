// Matrix-vector kernels: every stored type against the scalar oracle, and the property
// the remote path relies on: matvec and matmul give bit-identical rows for any thread count.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>
#include <vector>

#include "kernels/block_dot.h"
#include "kernels/kquant_dot.h"
#include "kernels/attention.h"
#include "kernels/matvec.h"
#include "kernels/thread_pool.h"
#include "base/cpu_features.h"

namespace larql {
namespace {

struct Stored {
  std::vector<uint8_t> bytes;
  Matrix m;
};

Stored random_matrix(DType t, size_t rows, size_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0, 1);
  Stored s;
  s.bytes.resize(rows * dtype_bytes(t, cols));
  if (dtype_is_blocked(t)) {
    // Random bytes, then finite f16 scales (and minimums) in every block: at 0 (and 2),
    // or at the end for q6_k; mxfp4's scale bytes 2^-12 .. 2^-1, the whole range below.
    std::uniform_int_distribution<int> byte(0, 255);
    for (auto& b : s.bytes) b = uint8_t(byte(rng));
    const size_t block = dtype_traits(t).block_bytes;
    if (t == DType::mxfp4) {
      std::uniform_int_distribution<int> exponent(116, 127);
      for (size_t at = 0; at < s.bytes.size(); at += block) s.bytes[at] = uint8_t(exponent(rng));
      s.m = Matrix{t, rows, cols, s.bytes.data()};
      return s;
    }
    std::vector<size_t> halves{t == DType::q6_k ? blocks::Q6Layout::d : 0};
    if (blocks::has_min(t)) halves.push_back(2);
    const float magnitude = blocks::is_kquant(t) ? 0.002f : 0.05f;  // times 6- or 8-bit sub-block scales
    for (size_t at = 0; at < s.bytes.size(); at += block)
      for (size_t offset : halves) {
        const uint16_t h = f32_to_f16(normal(rng) * magnitude);
        std::memcpy(&s.bytes[at + offset], &h, 2);
      }
    s.m = Matrix{t, rows, cols, s.bytes.data()};
    return s;
  }
  for (size_t i = 0; i < rows * cols; ++i) {
    const float v = normal(rng);
    if (t == DType::f32) reinterpret_cast<float*>(s.bytes.data())[i] = v;
    if (t == DType::f16) reinterpret_cast<uint16_t*>(s.bytes.data())[i] = f32_to_f16(v);
    if (t == DType::bf16) reinterpret_cast<uint16_t*>(s.bytes.data())[i] = f32_to_bf16(v);
  }
  s.m = Matrix{t, rows, cols, s.bytes.data()};
  return s;
}

std::vector<float> random_vector(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0, 1);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

// The SIMD paths this CPU runs (LARQL_CPU_MASK hides some); the rest are named as unchecked.
std::vector<MatmulIsa> simd_isas() {
  std::vector<MatmulIsa> isas;
  const MatmulIsa best = best_matmul_isa();
  for (MatmulIsa isa : {MatmulIsa::avx2, MatmulIsa::avx512, MatmulIsa::avx512bf16}) {
    static constexpr const char* kNames[] = {"scalar", "avx2", "avx512", "avx512bf16"};
    if (isa <= best) isas.push_back(isa);
    else std::printf("NOT CHECKED on this CPU: the %s matmul\n", kNames[int(isa)]);
  }
  if (best >= MatmulIsa::avx512 && !cpu_has_avx512_vnni())
    std::printf("NOT CHECKED on this CPU: the avx512 vnni block-format tiles (the avx512bw ones run instead)\n");
  return isas;
}

// Attention's two loops for the query heads that share a key-value head: key_scores() is
// each score's multiply-adds in increasing dimension, from the keys' blocks (attention.h),
// times the scale,
// and weighted_sum() each output's multiply-adds in increasing position, per head, on
// every ISA, bit for bit. Windows of positions start and end inside blocks and
// on their edges; the rows of scores are longer than the window and keep their ends.
TEST(Matmul, AttentionScoresAndWeightedSumsAreTheScalarOnesOnEveryIsa) {
  std::vector<MatmulIsa> isas = simd_isas();
  isas.insert(isas.begin(), MatmulIsa::scalar);
  size_t checked = 0;
  for (size_t n : {1u, 7u, 16u, 40u, 64u, 80u, 128u, 256u}) {
    const size_t stride = n + 24;  // values of one head inside wider rows
    for (size_t positions : {1u, 3u, 16u, 17u, 33u, 70u})
      for (size_t heads : {1u, 2u, 3u, 4u, 5u, 8u}) {
        const uint32_t seed = uint32_t(1000 * n + 10 * positions + heads);
        auto q = random_vector(heads * n, seed), kv = random_vector(positions * stride, seed + 1);
        kv[0] = 1e30f;  // wide ranges: a fused multiply-add rounds differently from a product and a sum
        const StridedRows queries{q.data(), heads, n}, rows{kv.data(), positions, stride};
        std::vector<float> keys(key_floats(positions, n), NAN);  // past the last position: never read into a score
        for (size_t p = 0; p < positions; ++p)
          for (size_t d = 0; d < n; ++d) keys[key_offset(p, d, n)] = rows.row(p)[d];
        for (auto [first, end] : {std::pair<size_t, size_t>{0, positions}, {positions / 3, positions}, {positions / 2, positions - positions / 4}}) {
          if (first >= end) continue;
          const size_t span = end - first + 2;
          const float scale = 1.0f / std::sqrt(float(n));  // inexact for most n: the product is rounded
          std::vector<float> expected(heads * span, 99.0f);
          for (size_t j = 0; j < heads; ++j)
            for (size_t p = first; p < end; ++p) {
              float s = 0;
              for (size_t d = 0; d < n; ++d) s = std::fma(queries.row(j)[d], rows.row(p)[d], s);
              expected[j * span + p - first] = s * scale;
            }
          for (MatmulIsa isa : isas) {
            std::vector<float> got(heads * span, 99.0f);
            key_scores_with(isa, queries, keys.data(), n, first, end, scale, got.data(), span);
            EXPECT_EQ(got, expected) << "key_scores n " << n << " positions " << first << ".." << end << " heads " << heads
                                     << " isa " << int(isa);
          }
          ++checked;
        }
        const size_t span = positions + 2;
        auto w = random_vector(heads * span, seed + 2);
        w[0] = 1e-30f;
        const StridedRows weights{w.data(), heads, span};
        std::vector<float> expected(heads * n);
        for (size_t j = 0; j < heads; ++j)
          for (size_t i = 0; i < n; ++i) {  // the definition
            float sum = 0;
            for (size_t r = 0; r < positions; ++r) sum = std::fma(weights.row(j)[r], rows.row(r)[i], sum);
            expected[j * n + i] = sum;
          }
        for (MatmulIsa isa : isas) {
          std::vector<float> sums(heads * n, 99.0f);
          weighted_sum_with(isa, weights, rows, n, sums.data());
          EXPECT_EQ(sums, expected) << "weighted_sum n " << n << " positions " << positions << " heads " << heads << " isa " << int(isa);
          // The same positions in two calls, the second accumulating (a tree of drafts'
          // ancestors after the cache): the same bits.
          const size_t split = positions / 3;
          std::vector<float> in_two(heads * n, 99.0f);
          weighted_sum_with(isa, weights, {rows.data, split, stride}, n, in_two.data());
          weighted_sum_with(isa, {w.data() + split, heads, span}, {rows.row(split), positions - split, stride}, n, in_two.data(), true);
          EXPECT_EQ(in_two, expected) << "weighted_sum in two runs, n " << n << " positions " << positions << " heads " << heads
                                      << " isa " << int(isa);
        }
      }
  }
  EXPECT_GT(checked, 800u);  // windows, each on every ISA
}

TEST(Matmul, EveryIsaEqualsTheScalarContractBitForBit) {
  ThreadPool pool(2);
  const auto isas = simd_isas();
  for (const auto& format : kDTypes) {
    const DType t = format.type;
    const std::vector<size_t> shapes = blocks::is_kquant(t)  ? std::vector<size_t>{256, 512, 2304}
                                       : dtype_is_blocked(t) ? std::vector<size_t>{32, 64, 96, 2080}
                                                             : std::vector<size_t>{1, 7, 16, 31, 33, 100, 1031, 2048};
    // 9-15 rows and 1-5 tokens leave every remainder of every tile shape (AVX2: 4 rows ×
    // groups of 3 tokens, 4 rows × 1; AVX-512: 6 or 4 rows × 4 tokens, 8 rows × 1), and 29
    // tokens fill an AVX2 prefill tile's 24; 1031 columns cross the AVX2 f32 prefill tiles'
    // k-block with a partial chunk after it, 2080 and 2304 the block tiles' (2048 values)
    // with one block or super-block after it.
    for (size_t cols : shapes) {
      for (size_t rows = 9; rows <= 15; ++rows) {
        auto w = random_matrix(t, rows, cols, uint32_t(cols + rows));
        for (size_t n : {1u, 2u, 3u, 4u, 5u, 29u}) {
          auto x = random_vector(n * cols, 7);
          std::vector<float> reference(n * rows);
          matmul_with(MatmulIsa::scalar, w.m, x.data(), n, reference.data(), pool);
          for (MatmulIsa isa : isas) {
            std::vector<float> y(n * rows);
            matmul_with(isa, w.m, x.data(), n, y.data(), pool);
            ASSERT_EQ(y, reference) << dtype_name(t) << " cols " << cols << " rows " << rows << " n " << n
                                    << " isa " << int(isa);
          }
          // And the contract is a dot product: within float rounding of the exact sum, with
          // the activations as the block formats read them (quantised to 8 bits: per block
          // of 32 in block_dot.h, per super-block of 256 in kquant_dot.h).
          QuantizedActivations qa;
          SuperBlockActivations qk;
          if (blocks::is_kquant(t)) qk.quantize(x.data(), n, cols, false, pool);
          else if (dtype_is_blocked(t)) qa.quantize(x.data(), n, cols, false, pool);
          auto activation = [&](size_t k) -> double {
            if (blocks::is_kquant(t)) return double(qk.scale[k / 256]) * qk.q[k];
            return dtype_is_blocked(t) ? double(qa.scale(0, k / 32)) * qa.q[k] : x[k];
          };
          for (size_t r = 0; r < rows; ++r) {
            double exact = 0, magnitude = 0;
            for (size_t k = 0; k < cols; ++k) {
              const double xk = activation(k);
              const double p = double(load_as_f32(t, w.m.row_ptr(r), k)) * xk;
              exact += p;
              magnitude += std::fabs(p);
            }
            EXPECT_NEAR(reference[r], exact, 1e-5 * magnitude + 1e-7) << dtype_name(t) << " row " << r;
          }
        }
      }
    }
  }
}

// The activations' 8-bit blocks (block_dot.h) are the same bits from the AVX2 quantiser as
// from the scalar one, edge cases included: ties, zeros, a block too small for 1/dx to be
// finite, infinities and NaN, the largest floats; and the one-thread and pooled passes agree.
TEST(Matmul, ActivationQuantisationIsTheSameOnEveryIsa) {
  const size_t cols = 320, rows = 70;  // ten blocks per row; enough rows for the pool to split them
  auto x = random_vector(rows * cols, 11);
  auto block = [&](size_t r, size_t b) { return &x[r * cols + b * 32]; };
  for (size_t i = 0; i < 32; ++i) {
    block(0, 0)[i] = i == 31 ? 127.0f : float(i) - 15.5f;   // dx = 1: every other value a tie
    block(0, 1)[i] = (i % 2 ? -127.0f : 127.0f) * (i + 1) / 32;
    block(0, 2)[i] = 0.0f;
    block(0, 3)[i] = i == 5 ? -0.0f : 1e-40f * float(i % 3);  // subnormal: 1 / dx overflows
    block(0, 4)[i] = i == 7 ? INFINITY : 1.0f;
    block(0, 5)[i] = i == 9 ? NAN : -2.0f;
    block(0, 6)[i] = (i % 2 ? -3e38f : 3e38f) / float(i + 1);
    block(0, 7)[i] = 0.5f * float(i) * float(i);
  }
  ThreadPool pool(2), one(1);
  QuantizedActivations scalar, simd, simd_one;
  scalar.quantize(x.data(), rows, cols, false, one);
  // The edge blocks come out as the contract says.
  EXPECT_EQ(scalar.q[3 * 32 + 1], 0) << "a block whose 1/dx overflows quantises to zeros";
  EXPECT_TRUE(std::isnan(scalar.scale(0, 4)) && std::isnan(scalar.scale(0, 5)));
  EXPECT_EQ(scalar.q[0], -16) << "ties round to even";
  EXPECT_EQ(scalar.q[1], -14) << "ties round to even";
  if (best_matmul_isa() == MatmulIsa::scalar) {
    std::printf("NOT CHECKED on this CPU: the AVX2 quantiser\n");
    return;
  }
  simd.quantize(x.data(), rows, cols, true, pool);
  simd_one.quantize(x.data(), rows, cols, true, one);
  auto same_bits = [](const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
  };
  for (const QuantizedActivations* qa : {&simd, &simd_one}) {
    EXPECT_EQ(qa->q, scalar.q);
    EXPECT_TRUE(same_bits(qa->block_scale, scalar.block_scale));
    EXPECT_TRUE(same_bits(qa->lane_group_sum, scalar.lane_group_sum));
  }
}

// The K-quants' super-blocks (kquant_dot.h) likewise: the AVX2 quantiser's integers, scales
// and sums of sixteen are the scalar one's, for the same edge cases over 256 values.
TEST(Matmul, SuperBlockQuantisationIsTheSameOnEveryIsa) {
  const size_t cols = 2560, rows = 20;  // ten super-blocks per row
  auto x = random_vector(rows * cols, 12);
  auto super_block = [&](size_t r, size_t b) { return &x[r * cols + b * 256]; };
  for (size_t i = 0; i < 256; ++i) {
    super_block(0, 0)[i] = i == 255 ? 127.0f : float(i % 32) - 15.5f;  // dx = 1: every other value a tie
    super_block(0, 1)[i] = (i % 2 ? -127.0f : 127.0f) * float(i + 1) / 256;
    super_block(0, 2)[i] = 0.0f;
    super_block(0, 3)[i] = i == 5 ? -0.0f : 1e-40f * float(i % 3);  // subnormal: 1 / dx overflows
    super_block(0, 4)[i] = i == 200 ? INFINITY : 1.0f;
    super_block(0, 5)[i] = i == 9 ? NAN : -2.0f;
    super_block(0, 6)[i] = (i % 2 ? -3e38f : 3e38f) / float(i + 1);
    super_block(0, 7)[i] = i < 16 ? 127.0f : -1.0f;  // a sum of sixteen at its largest, 2032
  }
  ThreadPool pool(2), one(1);
  SuperBlockActivations scalar, simd, simd_one;
  scalar.quantize(x.data(), rows, cols, false, one);
  EXPECT_EQ(scalar.q[3 * 256 + 1], 0) << "a super-block whose 1/dx overflows quantises to zeros";
  EXPECT_TRUE(std::isnan(scalar.scale[4]) && std::isnan(scalar.scale[5]));
  EXPECT_EQ(scalar.q[0], -16) << "ties round to even";
  EXPECT_EQ(scalar.q[1], -14) << "ties round to even";
  EXPECT_EQ(scalar.sums[7 * 16], 16 * 127);
  int first = 0;
  for (size_t i = 0; i < 16; ++i) first += scalar.q[i];
  EXPECT_EQ(scalar.sums[0], first);
  if (best_matmul_isa() == MatmulIsa::scalar) {
    std::printf("NOT CHECKED on this CPU: the AVX2 quantiser\n");
    return;
  }
  simd.quantize(x.data(), rows, cols, true, pool);
  simd_one.quantize(x.data(), rows, cols, true, one);
  for (const SuperBlockActivations* qa : {&simd, &simd_one}) {
    EXPECT_EQ(qa->q, scalar.q);
    EXPECT_EQ(qa->sums, scalar.sums);
    ASSERT_EQ(qa->scale.size(), scalar.scale.size());
    EXPECT_EQ(std::memcmp(qa->scale.data(), scalar.scale.data(), scalar.scale.size() * sizeof(float)), 0);
  }
}

// A range's arithmetic names the contracts its products add to the exact ones (PROTOCOL
// §8's ffn_arithmetic): the 32-value block formats are "f32", the K-quants "q8k".
TEST(Matmul, RangeArithmeticNamesTheContractsOfItsProducts) {
  const auto q8 = random_matrix(DType::q8_0, 2, 256, 1), q6 = random_matrix(DType::q6_k, 2, 256, 2);
  auto bf16_dot = random_matrix(DType::bf16, 2, 256, 3);
  bf16_dot.m.arithmetic = Arithmetic::bf16_dot;
  RangeArithmetic a;
  EXPECT_EQ(a.name(), "f32");
  a.add(q8.m);
  EXPECT_EQ(a.name(), "f32");
  a.add(Matrix{DType::q4_k, 0, 0, nullptr});  // a matrix the range does not hold
  EXPECT_EQ(a.name(), "f32");
  a.add(q6.m);
  EXPECT_EQ(a.name(), "q8k");
  a.add(bf16_dot.m);
  EXPECT_EQ(a.name(), "bf16-dot+q8k");
  for (const char* name : {"f32", "bf16-dot", "q8k", "bf16-dot+q8k"}) {
    const auto parsed = RangeArithmetic::from_name(name);
    ASSERT_TRUE(parsed) << name;
    EXPECT_EQ(parsed->name(), name);
  }
  for (const char* name : {"q8k+bf16-dot", "f16", ""}) EXPECT_FALSE(RangeArithmetic::from_name(name)) << name;
}

// The block tiles keep their rows unpacked for the later tiles of a token block
// (Tile::unpacked_rows); 261 tokens of 2048 or 2080 columns cross from one block to the
// next, and 2080 columns end each row in a single block, which is not kept.
TEST(Matmul, UnpackedRowsServeEveryTokenBlock) {
  for (DType t : {DType::q8_0, DType::q4_1, DType::q5_0, DType::q4_k, DType::q5_k, DType::q6_k, DType::mxfp4}) {
    const size_t rows = 9, cols = blocks::is_kquant(t) ? 2048 : 2080, n = 261;
    auto w = random_matrix(t, rows, cols, 3);
    auto x = random_vector(n * cols, 4);
    std::vector<float> reference(n * rows), y(n * rows);
    ThreadPool one(1), pool(2);
    for (size_t i = 0; i < n; ++i) matvec(w.m, &x[i * cols], &reference[i * rows], one);
    matmul(w.m, x.data(), n, y.data(), pool);
    EXPECT_EQ(y, reference) << dtype_name(t);
  }
}

TEST(Matmul, RowsEqualMatvecBitForBitAcrossThreadCounts) {
  for (DType t : {DType::f32, DType::bf16, DType::q8_0, DType::q5_1, DType::q4_k, DType::q6_k, DType::mxfp4}) {
    const size_t cols = blocks::is_kquant(t) ? 512 : dtype_is_blocked(t) ? 288 : 257;
    auto w = random_matrix(t, 300, cols, 1);
    const size_t n = 5;
    auto x = random_vector(n * cols, 2);
    std::vector<float> reference(n * 300);
    ThreadPool one(1);
    for (size_t i = 0; i < n; ++i) matvec(w.m, &x[i * cols], &reference[i * 300], one);
    for (size_t threads : {1u, 2u, 3u}) {
      ThreadPool pool(threads);
      std::vector<float> y(n * 300);
      matmul(w.m, x.data(), n, y.data(), pool);
      EXPECT_EQ(y, reference) << dtype_name(t) << " with " << threads << " threads";
    }
  }
}

// Products of one input in one job (q, k and v; gate and up) give each product's matmul bit
// for bit, whatever mix of arithmetics they read the input in (8-bit blocks of 32 and
// super-blocks of 256, as a K-quant file's fallback rows meet its K-quant ones; bf16; f32).
TEST(Matmul, SharedInputProductsEqualOneMatmulEach) {
  const size_t cols = 512;
  auto bf16_dot = random_matrix(DType::bf16, 40, cols, 5);
  bf16_dot.m.arithmetic = Arithmetic::bf16_dot;
  const auto q4 = random_matrix(DType::q4_k, 9, cols, 6), q6 = random_matrix(DType::q6_k, 17, cols, 7);
  const auto bf16 = random_matrix(DType::bf16, 33, cols, 8), q5 = random_matrix(DType::q5_0, 12, cols, 9);
  const std::vector<const Matrix*> mats{&bf16_dot.m, &q4.m, &q5.m, &q6.m, &bf16.m};
  std::vector<MatmulIsa> isas = simd_isas();
  isas.push_back(MatmulIsa::scalar);
  ThreadPool one(1), two(2);
  for (size_t n : {1u, 5u, 130u}) {
    auto x = random_vector(n * cols, uint32_t(n));
    for (MatmulIsa isa : isas) {
      for (ThreadPool* pool : {&one, &two}) {
        std::vector<std::vector<float>> separate(mats.size()), shared(mats.size());
        std::vector<Product> products;
        for (size_t i = 0; i < mats.size(); ++i) {
          separate[i].resize(n * mats[i]->rows), shared[i].resize(n * mats[i]->rows, NAN);
          matmul_with(isa, *mats[i], x.data(), n, separate[i].data(), *pool);
          products.push_back({mats[i], shared[i].data()});
        }
        matmul_shared_input_with(isa, products, x.data(), n, *pool);
        for (size_t i = 0; i < mats.size(); ++i)
          EXPECT_EQ(shared[i], separate[i]) << "product " << i << " n " << n << " isa " << int(isa) << " threads " << pool->size();
      }
    }
  }
  // The products must read one input: a different width is refused, not read past.
  const auto narrow = random_matrix(DType::f32, 4, 256, 9);
  std::vector<float> y(40), z(4);
  const Product mismatched[] = {{&bf16_dot.m, y.data()}, {&narrow.m, z.data()}};
  auto x = random_vector(cols, 1);
  EXPECT_THROW(matmul_shared_input(mismatched, x.data(), 1, two), std::invalid_argument);
}

// A mixture-of-experts layer's products: each of its own input and row count (an input
// given twice is prepared once), more than four of them, mixed formats; the same bits as
// one matmul per product for every ISA and thread count.
TEST(Matmul, EachOfItsOwnInputEqualsSeparateProducts) {
  const size_t cols = 512;
  auto bf16_dot = random_matrix(DType::bf16, 40, cols, 5);
  bf16_dot.m.arithmetic = Arithmetic::bf16_dot;
  const auto q8 = random_matrix(DType::q8_0, 24, cols, 6), q4 = random_matrix(DType::q4_k, 17, cols, 7);
  const auto f32 = random_matrix(DType::f32, 33, cols, 8), q6 = random_matrix(DType::q6_k, 9, cols, 10);
  const auto narrow = random_matrix(DType::q8_0, 16, 256, 11);  // another width
  std::vector<MatmulIsa> isas = simd_isas();
  isas.push_back(MatmulIsa::scalar);
  ThreadPool one(1), two(2);
  const std::vector<float> x1 = random_vector(7 * cols, 1), x2 = random_vector(1 * cols, 2), x3 = random_vector(3 * 256, 3);
  struct Case {
    const Matrix* w;
    const float* x;
    size_t n;
  };
  const std::vector<Case> cases{{&bf16_dot.m, x1.data(), 7}, {&q8.m, x1.data(), 7}, {&q4.m, x2.data(), 1}, {&f32.m, x2.data(), 1},
                                {&q6.m, x1.data(), 7},       {&narrow.m, x3.data(), 3}, {&q8.m, x2.data(), 1}};
  for (MatmulIsa isa : isas)
    for (ThreadPool* pool : {&one, &two}) {
      std::vector<std::vector<float>> separate(cases.size()), each(cases.size());
      std::vector<InputProduct> products;
      for (size_t i = 0; i < cases.size(); ++i) {
        separate[i].resize(cases[i].n * cases[i].w->rows), each[i].resize(cases[i].n * cases[i].w->rows, NAN);
        matmul_with(isa, *cases[i].w, cases[i].x, cases[i].n, separate[i].data(), *pool);
        products.push_back({cases[i].w, cases[i].x, cases[i].n, each[i].data()});
      }
      matmul_each_with(isa, products, *pool);
      for (size_t i = 0; i < cases.size(); ++i)
        EXPECT_EQ(each[i], separate[i]) << "product " << i << " isa " << int(isa) << " threads " << pool->size();
    }
}

TEST(ThreadPool, CoversEveryIndexOnce) {
  ThreadPool pool(3);
  for (size_t n : {1u, 2u, 5u, 16u, 1000u}) {
    std::vector<int> hits(n, 0);
    pool.parallel_for(n, [&](size_t b, size_t e) {
      for (size_t i = b; i < e; ++i) ++hits[i];
    }, 4);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(hits[i], 1) << "n " << n << " index " << i;
  }
}

}  // namespace
}  // namespace larql
