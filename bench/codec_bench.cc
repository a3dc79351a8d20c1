// Codec throughput against memcpy of the same f32 payload (PROTOCOL messages, headers
// included, buffers reused). Bytes processed are counted on the f32 side: 4·S·H.
// Run: make bench   (or build/bench/codec_bench --benchmark_filter=/256)
#include <benchmark/benchmark.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "wire/codec.h"
#include "wire/kernels.h"

namespace {

using namespace larql::wire;

std::vector<float> residual(size_t n) {
  std::mt19937 rng(42);
  std::normal_distribution<float> normal(0.0f, 4.0f);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

struct Shape {
  size_t hidden, seq_len;
  explicit Shape(const benchmark::State& s) : hidden(s.range(0)), seq_len(s.range(1)) {}
  size_t count() const { return hidden * seq_len; }
};

void finish(benchmark::State& state, const Shape& shape) {
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(4 * shape.count()));
  state.SetLabel(best_kernels().name);
}

void BM_Memcpy(benchmark::State& state) {
  Shape shape(state);
  auto src = residual(shape.count());
  std::vector<float> dst(shape.count());
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), 4 * shape.count());
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  finish(state, shape);
}

void encode(benchmark::State& state, Encoding e) {
  Shape shape(state);
  auto values = residual(shape.count());
  const RequestHeader header{.layers = {7}, .seq_len = uint32_t(shape.seq_len)};
  std::string out;
  for (auto _ : state) {
    auto r = encode_request(e, header, shape.hidden, values, out);
    if (!r.ok() || r->encoding != e) state.SkipWithError("unexpected fallback");
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  finish(state, shape);
}

void decode(benchmark::State& state, Encoding e) {
  Shape shape(state);
  auto values = residual(shape.count());
  std::string msg;
  (void)encode_request(e, {.layers = {7}, .seq_len = uint32_t(shape.seq_len)}, shape.hidden, values, msg);
  std::vector<float> out(shape.count());
  for (auto _ : state) {
    auto view = parse_request(as_bytes(msg), e, shape.hidden);
    if (!view.ok() || !decode_values(e, view->values, shape.seq_len, shape.hidden, out).ok())
      state.SkipWithError("decode failed");
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  finish(state, shape);
}

void BM_EncodeF32(benchmark::State& s) { encode(s, Encoding::f32); }
void BM_DecodeF32(benchmark::State& s) { decode(s, Encoding::f32); }
void BM_EncodeF16(benchmark::State& s) { encode(s, Encoding::f16); }
void BM_DecodeF16(benchmark::State& s) { decode(s, Encoding::f16); }
void BM_EncodeI8(benchmark::State& s) { encode(s, Encoding::i8); }
void BM_DecodeI8(benchmark::State& s) { decode(s, Encoding::i8); }
void BM_EncodeQ8(benchmark::State& s) { encode(s, Encoding::q8); }
void BM_DecodeQ8(benchmark::State& s) { decode(s, Encoding::q8); }

#define LARQL_SHAPES ArgsProduct({{2560, 4096, 5120}, {1, 32, 256}})
BENCHMARK(BM_Memcpy)->LARQL_SHAPES;
BENCHMARK(BM_EncodeF16)->LARQL_SHAPES;
BENCHMARK(BM_DecodeF16)->LARQL_SHAPES;
BENCHMARK(BM_EncodeI8)->LARQL_SHAPES;
BENCHMARK(BM_DecodeI8)->LARQL_SHAPES;
BENCHMARK(BM_EncodeQ8)->LARQL_SHAPES;
BENCHMARK(BM_DecodeQ8)->LARQL_SHAPES;
BENCHMARK(BM_EncodeF32)->LARQL_SHAPES;
BENCHMARK(BM_DecodeF32)->LARQL_SHAPES;

}  // namespace

BENCHMARK_MAIN();
