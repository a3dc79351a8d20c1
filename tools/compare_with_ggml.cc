// By hand, not part of the build or the tests: larql's block quantisers and dequantisers
// against llama.cpp's own (libggml-base), on random rows of three distributions and on
// random bytes. docs/benchmarks/history.md quotes its result. With a llama.cpp build in $LLAMA:
//
//   cmake --build build --target larql_engine
//   g++ -std=c++20 -O2 -Isrc tools/compare_with_ggml.cc build/liblarql_engine.a build/liblarql_wire.a \
//       -L$LLAMA/build/bin -lggml-base -Wl,-rpath,$LLAMA/build/bin -o /tmp/compare_with_ggml
//   /tmp/compare_with_ggml      # every line should end "0 differ"
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/block_formats.h"

extern "C" {
struct ggml_init_params {
  size_t mem_size;
  void* mem_buffer;
  bool no_alloc;
};
void* ggml_init(ggml_init_params);  // fills ggml's fp16 tables, which the reference code reads
void quantize_row_q4_0_ref(const float*, void*, long);
void quantize_row_q5_1_ref(const float*, void*, long);
void quantize_row_q8_0_ref(const float*, void*, long);
void quantize_row_q4_K_ref(const float*, void*, long);
void quantize_row_q5_K_ref(const float*, void*, long);
void quantize_row_q6_K_ref(const float*, void*, long);
void dequantize_row_q4_K(const void*, float*, long);
void dequantize_row_q5_K(const void*, float*, long);
void dequantize_row_q6_K(const void*, float*, long);
void quantize_row_mxfp4_ref(const float*, void*, long);
void dequantize_row_mxfp4(const void*, float*, long);
}

using namespace larql;

namespace {

struct Reference {
  DType type;
  void (*quantize)(const float*, void*, long);
  void (*dequantize)(const void*, float*, long);  // K-quants and MXFP4
};

size_t differing_blocks(DType t, const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  const size_t bytes = dtype_traits(t).block_bytes;
  size_t differ = 0;
  for (size_t i = 0; i < a.size(); i += bytes) differ += std::memcmp(&a[i], &b[i], bytes) != 0;
  return differ;
}

}  // namespace

int main() {
  ggml_init({1 << 20, nullptr, false});
  const Reference references[] = {
      {DType::q4_0, quantize_row_q4_0_ref, nullptr},          {DType::q5_1, quantize_row_q5_1_ref, nullptr},
      {DType::q8_0, quantize_row_q8_0_ref, nullptr},          {DType::q4_k, quantize_row_q4_K_ref, dequantize_row_q4_K},
      {DType::q5_k, quantize_row_q5_K_ref, dequantize_row_q5_K}, {DType::q6_k, quantize_row_q6_K_ref, dequantize_row_q6_K},
      {DType::mxfp4, quantize_row_mxfp4_ref, dequantize_row_mxfp4},
  };
  std::mt19937 rng(42);
  const size_t n = 256 * 4000;
  std::vector<float> x(n);
  const char* names[] = {"gaussian", "uniform", "outliers"};
  for (int dist = 0; dist < 3; ++dist) {
    std::normal_distribution<float> normal(0, 1);
    std::uniform_real_distribution<float> uniform(-0.3f, 1.0f);
    for (size_t i = 0; i < n; ++i)
      x[i] = dist == 0 ? normal(rng) * 0.02f : dist == 1 ? uniform(rng) : (i % 97 == 0 ? 50.0f : normal(rng));
    if (dist == 2) std::fill(x.begin(), x.begin() + 256, 0.0f);  // a zero super-block
    for (const auto& ref : references) {
      std::vector<uint8_t> ours(dtype_bytes(ref.type, n)), theirs(ours.size());
      blocks::quantize_row(ref.type, x.data(), n, ours.data());
      ref.quantize(x.data(), theirs.data(), long(n));
      const std::string type(dtype_name(ref.type));
      std::printf("%-8s %-5s quantised: %zu of %zu blocks differ\n", names[dist], type.c_str(),
                  differing_blocks(ref.type, ours, theirs), ours.size() / dtype_traits(ref.type).block_bytes);
      if (!ref.dequantize) continue;
      // Dequantised: the quantised row, then random bytes with finite f16 scales.
      std::vector<uint8_t> bytes = ours;
      for (int round = 0; round < 2; ++round) {
        std::vector<float> a(n), b(n);
        dequantize_row(ref.type, bytes.data(), n, a.data());
        ref.dequantize(bytes.data(), b.data(), long(n));
        size_t differ = 0;
        for (size_t i = 0; i < n; ++i) differ += std::memcmp(&a[i], &b[i], 4) != 0;
        std::printf("%-8s %-5s dequantised (%s): %zu values differ\n", names[dist], type.c_str(), round ? "random bytes" : "the row", differ);
        for (auto& v : bytes) v = uint8_t(rng());
        for (size_t at = 0; at < bytes.size(); at += dtype_traits(ref.type).block_bytes) {
          if (ref.type == DType::mxfp4) {  // every scale byte but 0xFF (refused where larql converts)
            bytes[at] = uint8_t(rng() % 255);
            continue;
          }
          const uint16_t h = uint16_t(0x2000 | (rng() & 0x3ff));
          if (ref.type == DType::q6_k) std::memcpy(&bytes[at + blocks::Q6Layout::d], &h, 2);
          else std::memcpy(&bytes[at], &h, 2), std::memcpy(&bytes[at + 2], &h, 2);
        }
      }
    }
  }
}
