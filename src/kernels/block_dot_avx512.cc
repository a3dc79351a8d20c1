// AVX-512 tiles for block-format weights (block_dot.h's contract), with and without VNNI
// (block_dot_avx512_tiles.inc, compiled once for each): two blocks per zmm (lanes 0-7 the
// even block's groups, 8-15 the odd one's). vpdpbusd multiplies unsigned by signed bytes,
// four per lane, exactly. The formats stored without an offset (q4_1, q5_1) go in as the
// unsigned operand and the activations signed. The signed ones (q8_0; q4_0 and q5_0 once
// their offset z is taken off) go in signed and the activations unsigned, qx + 128, whose
// 128 · Σqw per row is the dots' start (kUnsignedX). Without VNNI, the offset formats'
// z · Σqx per token is taken out instead.
//
// The K-quants' AVX-512 prefill tile (kquant_dot_avx512_tile.inc, kquant_dot.h's contract)
// is compiled here too, with and without VNNI, in the same two namespaces.
#if defined(__x86_64__)

#include "base/simd_avx512.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/block_unpack_avx2.h"
#include "kernels/matvec_tiles.h"

namespace larql {
namespace {

#define LARQL_TILE_TARGET LARQL_AVX512_TARGET("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")
#define LARQL_TILE_VNNI 1
namespace vnni {
#include "kernels/block_dot_avx512_tiles.inc"
#include "kernels/kquant_dot_avx512_tile.inc"
}  // namespace vnni
#undef LARQL_TILE_TARGET
#undef LARQL_TILE_VNNI

#define LARQL_TILE_TARGET LARQL_AVX512_TARGET("avx512f,avx512bw,avx512vl,avx2,fma,f16c")
#define LARQL_TILE_VNNI 0
namespace bw {
#include "kernels/block_dot_avx512_tiles.inc"
#include "kernels/kquant_dot_avx512_tile.inc"
}  // namespace bw
#undef LARQL_TILE_TARGET
#undef LARQL_TILE_VNNI

}  // namespace

void block_tile_vnni(const Tile& t) {
  blocks::with_32_value_format(t.w->dtype, [&]<DType T>() { vnni::dispatch<T>(t); });
}

void block_tile_avx512bw(const Tile& t) {
  blocks::with_32_value_format(t.w->dtype, [&]<DType T>() { bw::dispatch<T>(t); });
}

void kquant_tile_avx512_vnni(const Tile& t) {
  blocks::with_kquant_format(t.w->dtype, [&]<DType T>() { vnni::prefill_tile<T>(t); });
}

void kquant_tile_avx512bw(const Tile& t) {
  blocks::with_kquant_format(t.w->dtype, [&]<DType T>() { bw::prefill_tile<T>(t); });
}

}  // namespace larql

#endif
