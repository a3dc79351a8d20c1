// Run-time CPU feature checks for kernel dispatch (builds never assume -march=native).
#pragma once

namespace larql {

// Every check honours LARQL_CPU_MASK, a comma-separated list of features to treat as
// absent ("avx512vnni", "avx512bf16", "avx512", "avx2"; masking one masks those above it; and
// "avxvnni"), so that the fallbacks run
// and are tested on any CPU (make test runs the kernel tests masked). In the tests'
// emulated build (LARQL_EMULATE_AVX512, simd_avx512.h) every AVX-512 check is true on an
// AVX2 CPU unless masked.

// AVX2, FMA and F16C, with the OS saving YMM state.
bool cpu_has_avx2_fma_f16c();

// The above plus AVX-VNNI (vpdpbusd on ymm registers; masked also by "avxvnni", not by
// "avx512": a CPU can have either without the other).
bool cpu_has_avx_vnni();

// AVX-512 Foundation and Byte/Word, with the OS saving ZMM and mask-register state.
bool cpu_has_avx512f_bw();

// The above plus AVX512_VNNI and AVX512VL (masked also by "avx512vnni").
bool cpu_has_avx512_vnni();

// Whether decode products (one token) of q8_0 matrices run faster one row at a time on the
// 256-bit tile than on the ISA's multi-row tile (eight rows on AVX-512, four on AVX2): on
// AMD's Zen 4 (family 19h with AVX-512, also when LARQL_CPU_MASK hides it), whose 512-bit
// units are double-pumped and whose prefetcher follows one stream per thread, one row at a
// time reads a q8_0 matrix from memory 1.5-1.9x faster than the AVX-512 tile and decodes
// the MoE's experts 1.5x faster than four interleaved rows (docs/benchmarks/history.md, "K-quant
// decode on Zen 4" and "Q8_0 decode one row at a time on Zen 4's AVX2"; the K-quants' decode
// takes its one-row tile on every CPU). LARQL_BLOCK_DECODE=256 (one row) or 512 (the ISA's
// tile) chooses on any CPU. Both give the same bits.
bool cpu_prefers_one_row_q8_0_decode();

// AVX-512 F/BW plus AVX512_BF16 (vdpbf16ps, vcvtneps2bf16; masked also by "avx512bf16").
bool cpu_has_avx512_bf16();

}  // namespace larql
