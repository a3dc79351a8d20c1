// The AVX2 K-quant tile compiled again with AVX-VNNI's vpdpwssd (kquant_dot_avx2.cc):
// kquant_tile_avx2_vnni, for CPUs that have AVX-VNNI.
#define LARQL_AVX_VNNI 1
#include "kernels/kquant_dot_avx2.cc"
