// AVX-512 prefill tile for kquant_dot.h's contract (kquant_dot_avx512_tile.inc, compiled
// with and without VNNI): a pair of blocks per zmm, vpmaddubsw's pair sums scaled into int32
// lanes, each super-block's sixteen (row, token) sums gathered by one reduction tree into a
// vector whose lanes are the sixteen accumulators, so that the float steps take one
// instruction each for the whole tile. Decode takes the AVX2 tile (kquant_dot_avx2.cc).
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
#include "kernels/kquant_dot_avx512_tile.inc"
}  // namespace vnni
#undef LARQL_TILE_TARGET
#undef LARQL_TILE_VNNI

#define LARQL_TILE_TARGET LARQL_AVX512_TARGET("avx512f,avx512bw,avx512vl,avx2,fma,f16c")
#define LARQL_TILE_VNNI 0
namespace bw {
#include "kernels/kquant_dot_avx512_tile.inc"
}  // namespace bw
#undef LARQL_TILE_TARGET
#undef LARQL_TILE_VNNI

}  // namespace

void kquant_tile_avx512_vnni(const Tile& t) {
  blocks::with_kquant_format(t.w->dtype, [&]<DType T>() { vnni::prefill_tile<T>(t); });
}

void kquant_tile_avx512bw(const Tile& t) {
  blocks::with_kquant_format(t.w->dtype, [&]<DType T>() { bw::prefill_tile<T>(t); });
}

}  // namespace larql

#endif
