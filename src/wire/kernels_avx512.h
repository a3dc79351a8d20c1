// The AVX-512 (F + BW) quantisers and the q8 decoder: the kernels that gain from the wider registers.
#pragma once

#include <cstddef>
#include <cstdint>

namespace larql::wire {

#if defined(__x86_64__)
// Same contract as WireKernels::encode_i8_row; positions past the last multiple of 64 use
// `quantize_tail` (the AVX2 file's scalar twin of the vector arithmetic).
// Call only when cpu_has_avx512f_bw().
bool encode_i8_row_avx512(const float* in, size_t n, uint8_t* block, float (*quantize_tail)(float x, float inv, float scale));
// Same contracts as WireKernels::encode_q8 / decode_q8. Call only when cpu_has_avx512f_bw()
// and cpu_has_avx2_fma_f16c().
bool encode_q8_avx512(const float* in, size_t n, uint8_t* blocks);
bool decode_q8_avx512(const uint8_t* blocks, size_t n, float* out);
#endif

}  // namespace larql::wire
