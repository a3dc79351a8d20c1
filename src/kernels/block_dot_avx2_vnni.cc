// The AVX2 block-format tiles compiled again with AVX-VNNI's vpdpbusd (block_dot_avx2.cc):
// block_tile_avx2_vnni, for CPUs that have AVX-VNNI but not AVX-512.
#define LARQL_AVX_VNNI 1
#include "kernels/block_dot_avx2.cc"
