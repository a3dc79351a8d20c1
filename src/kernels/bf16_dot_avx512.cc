// AVX-512 tiles for bf16_dot.h's contract: vdpbf16ps where the CPU has AVX512_BF16, its
// emulation elsewhere (bf16_dot_avx512_tiles.inc, compiled once for each); and the
// activations' rounding by vcvtneps2bf16.
#if defined(__x86_64__)

#include "base/simd_avx512.h"

#include <array>
#include <utility>

#include "kernels/bf16_dot.h"
#include "kernels/matvec_tiles.h"

namespace larql {
namespace {

#define LARQL_TILE_TARGET LARQL_AVX512_TARGET("avx512f,avx512bw,avx512vl,avx512bf16")
#define LARQL_BF16_HW 1
namespace hw {
#include "kernels/bf16_dot_avx512_tiles.inc"
}  // namespace hw
#undef LARQL_TILE_TARGET
#undef LARQL_BF16_HW

#define LARQL_TILE_TARGET LARQL_AVX512_TARGET("avx512f,avx512bw,avx512vl")
#define LARQL_BF16_HW 0
namespace emulated {
#include "kernels/bf16_dot_avx512_tiles.inc"
}  // namespace emulated
#undef LARQL_TILE_TARGET
#undef LARQL_BF16_HW

}  // namespace

void bf16dot_tile_avx512bf16(const Tile& t) { hw::dispatch(t); }
void bf16dot_tile_avx512(const Tile& t) { emulated::dispatch(t); }

// vcvtneps2bf16 rounds as the contract says (the contract is defined by it).
LARQL_AVX512_TARGET("avx512f,avx512bf16") void round_activation_chunk_avx512bf16(const float* x, uint16_t* out) {
  for (int half = 0; half < 2; ++half)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 16 * half), (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(x + 16 * half)));
}

}  // namespace larql

#endif
