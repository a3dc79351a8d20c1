// Run-time CPU feature checks for kernel dispatch (builds never assume -march=native).
#pragma once

namespace larql {

// AVX2, FMA and F16C, with the OS saving YMM state.
bool cpu_has_avx2_fma_f16c();

}  // namespace larql
