// The value-array kernels of the codec: f32/f16 conversion and i8/q8 quantisation, over
// raw little-endian bytes. One scalar table (the test oracle, and the fallback on CPUs
// without AVX2/F16C/FMA) and one AVX2 table, chosen once at run time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace larql::wire {

struct WireKernels {
  const char* name;
  // Copies n floats to LE bytes. False if any value is NaN or ±inf (all are still written).
  bool (*encode_f32)(const float* in, size_t n, uint8_t* out);
  // Copies n LE floats out. False if any value is NaN or ±inf.
  bool (*decode_f32)(const uint8_t* in, size_t n, float* out);
  // Converts n floats to LE f16 (round to nearest even). False if any value does not fit
  // f16 (NaN, ±inf, or |x| ≥ 65520, which would become infinity).
  bool (*encode_f16)(const float* in, size_t n, uint8_t* out);
  // Converts n LE f16 values to floats (exact). False if any is NaN or ±inf.
  bool (*decode_f16)(const uint8_t* in, size_t n, float* out);
  // Writes one i8 position block: [scale f32][zero_point f32 = 0][q i8 × n].
  // False (block content unspecified) if a value is non-finite or the scale would not
  // survive decoding (127 × scale overflows).
  bool (*encode_i8_row)(const float* in, size_t n, uint8_t* block);
  // out[i] = q[i] × scale.
  void (*decode_i8_row)(const uint8_t* q, size_t n, float scale, float* out);
  // Writes n / 32 q8 blocks (n a multiple of 32; blocks never straddle positions, so one
  // call covers a whole value array). False (blocks unspecified) if a value is non-finite
  // or a block's max|x| / 127 rounds to f16 infinity.
  bool (*encode_q8)(const float* in, size_t n, uint8_t* blocks);
  // Decodes n / 32 q8 blocks. False (out unspecified) if a block's scale is negative or
  // non-finite (q8_scale_is_valid).
  bool (*decode_q8)(const uint8_t* blocks, size_t n, float* out);
};

const WireKernels& scalar_kernels();
// The fastest table this CPU runs: AVX2 + F16C + FMA (with the AVX-512BW i8 encoder where
// available), otherwise the scalar table.
const WireKernels& best_kernels();
// Every table this CPU can run, scalar first: the tests check each against the scalar one.
std::vector<const WireKernels*> supported_kernels();

}  // namespace larql::wire
