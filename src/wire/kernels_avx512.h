// The AVX-512 (F + BW) i8 quantiser, the one kernel that gains from the wider registers.
#pragma once

#include <cstddef>
#include <cstdint>

namespace larql::wire {

#if defined(__x86_64__)
// Same contract as WireKernels::encode_i8_row; positions past the last multiple of 64 use
// `quantize_tail` (the AVX2 file's scalar twin of the vector arithmetic).
// Call only when cpu_has_avx512f_bw().
bool encode_i8_row_avx512(const float* in, size_t n, uint8_t* block, float (*quantize_tail)(float x, float inv, float scale));
#endif

}  // namespace larql::wire
