// The x86 intrinsics for code with AVX-512 paths, and LARQL_AVX512_TARGET(features) for its
// functions. Normally the compiler's own intrinsics with those target features. In the
// test-only emulated build (LARQL_EMULATE_AVX512, tests/CMakeLists.txt) the AVX-512 ones
// come from SIMDe, implemented with AVX2 and scalar code, so that the AVX-512 kernels are
// tested against their oracles on CPUs without AVX-512 too.
#pragma once

#include <immintrin.h>  // first: SIMDe's aliases below are macros that would rename its contents

#if defined(LARQL_EMULATE_AVX512)
#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/x86/avx512.h>

#include "base/simd_avx512_emulation.h"
#define LARQL_AVX512_TARGET(features) __attribute__((target("avx2,fma,f16c")))
#else
#define LARQL_AVX512_TARGET(features) __attribute__((target(features)))
#endif
