#include "model/gpt_oss_experts.h"

#include <sys/mman.h>

#include <cstring>
#include <memory>
#include <vector>

#include "model/expert_tensors.h"
#include "model/weight_reader.h"

namespace larql {
namespace {

// Bytes the model keeps, uninitialised: an expert's matrix in an anonymous mapping on
// transparent huge pages where the kernel allows (zeroed 4 KiB pages, each a fault, were
// three quarters of a 2.5 GB load's time here); small ones (biases), or any when mapping
// fails, on the heap, so that a large model's mappings stay few.
uint8_t* keep(Model& m, size_t bytes) {
  constexpr size_t kMapped = size_t(1) << 20;
  void* p = bytes >= kMapped ? mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) : MAP_FAILED;
  if (p == MAP_FAILED) {
    auto heap = std::shared_ptr<uint8_t[]>(new uint8_t[bytes]);
    m.converted.emplace_back(heap, heap.get());
    return heap.get();
  }
  madvise(p, bytes, MADV_HUGEPAGE);
  m.converted.emplace_back(p, [bytes](const void* q) { munmap(const_cast<void*>(q), bytes); });
  return static_cast<uint8_t*>(p);
}

}  // namespace

void mxfp4_block_from_hf(const uint8_t* hf_values, uint8_t scale, uint8_t* ggml_block) {
  ggml_block[0] = scale;
  // Values j and j + 16 are in bytes j/2 and 8 + j/2, in their low nibbles for even j.
  for (size_t k = 0; k < 8; ++k) {
    const uint8_t first = hf_values[k], second = hf_values[8 + k];
    ggml_block[1 + 2 * k] = uint8_t((first & 0x0F) | (second & 0x0F) << 4);
    ggml_block[2 + 2 * k] = uint8_t((first >> 4) | (second & 0xF0));
  }
}

void mxfp4_block_to_hf(const uint8_t* ggml_block, uint8_t* hf_values, uint8_t* scale) {
  *scale = ggml_block[0];
  auto value = [&](size_t v) { return v < 16 ? ggml_block[1 + v] & 0x0F : ggml_block[1 + v - 16] >> 4; };
  for (size_t k = 0; k < 16; ++k) hf_values[k] = uint8_t(value(2 * k) | value(2 * k + 1) << 4);
}

Status assemble_gpt_oss_experts(Model& m, size_t l, const std::string& source,
                                const std::function<std::optional<FoundTensor>(const std::string& name)>& find) {
  const ModelConfig& c = m.config;
  const size_t E = c.moe.experts, I = c.moe.expert_ffn, H = c.hidden;
  // The stored tensors: these names, then _blocks, _scales or _bias after them.
  const std::string gate_up_name = hf_stacked_gate_up_name(kGptOssMoe, l), down_name = hf_stacked_down_name(kGptOssMoe, l);
  auto fail = [&](const std::string& what) { return make_error(ErrorCode::invalid_argument, source + ": " + what); };
  // Tensor `name` of `shape`: a number format when `raw` is false, U8 bytes when true.
  auto need = [&](const std::string& name, const std::vector<size_t>& shape, bool raw) -> Result<FoundTensor> {
    auto found = find(name);
    if (!found) return fail("tensor '" + name + "' (GPT-OSS's experts) is missing");
    if (!raw) {
      if (auto s = check_found_tensor(*found, name, shape); !s) return s.error();
      return *found;
    }
    if (found->dtype || found->shape != shape)
      return fail("tensor '" + name + "' is " + (found->dtype ? std::string(dtype_name(*found->dtype)) : found->format_name) + " " +
                  shape_string(found->shape) + "; expected U8 " + shape_string(shape) + " (MXFP4 blocks or scales)");
    return *found;
  };
  LayerWeights& w = m.layers[l];
  w.experts.assign(E, ExpertWeights{});

  if (find(gate_up_name + "_blocks")) {  // MXFP4
    if (H % 32 != 0 || I % 32 != 0) return fail("MXFP4 experts need hidden and intermediate sizes that are multiples of 32");
    auto gu_blocks = need(gate_up_name + "_blocks", {E, 2 * I, H / 32, 16}, true);
    if (!gu_blocks) return gu_blocks.error();
    auto gu_scales = need(gate_up_name + "_scales", {E, 2 * I, H / 32}, true);
    if (!gu_scales) return gu_scales.error();
    auto d_blocks = need(down_name + "_blocks", {E, H, I / 32, 16}, true);
    if (!d_blocks) return d_blocks.error();
    auto d_scales = need(down_name + "_scales", {E, H, I / 32}, true);
    if (!d_scales) return d_scales.error();
    // An expert's stored blocks and scale bytes, read with pread, not through the mapping,
    // which would keep them in the process beside their repacked copy (weight_reader.h);
    // gate_up's once for both of its halves.
    WeightReader reader(m);
    std::vector<uint8_t> b, s;
    auto read_expert = [&](const FoundTensor& blocks, const FoundTensor& scales, size_t expert, size_t stored_rows, size_t cols) {
      b.resize(stored_rows * cols / 32 * 16), s.resize(stored_rows * cols / 32);
      reader.read(static_cast<const uint8_t*>(blocks.data) + expert * b.size(), b.size(), b.data());
      reader.read(static_cast<const uint8_t*>(scales.data) + expert * s.size(), s.size(), s.data());
    };
    // Of the expert read, rows of `cols` values from stored row `from` on, every `step`-th, as GGML blocks.
    auto repack = [&](const std::string& name, size_t expert, size_t rows, size_t cols, size_t from, size_t step) -> Result<Matrix> {
      const size_t per_row = cols / 32;
      uint8_t* out = keep(m, rows * per_row * 17);
      for (size_t r = 0; r < rows; ++r) {
        const size_t stored = from + r * step;
        for (size_t k = 0; k < per_row; ++k) {
          const uint8_t scale = s[stored * per_row + k];
          if (scale == 0xFF)
            return fail("tensor '" + name + "_scales' has the scale byte 0xFF (NaN in MXFP4's E8M0) at expert " +
                        std::to_string(expert) + ", row " + std::to_string(stored) + ", block " + std::to_string(k));
          mxfp4_block_from_hf(&b[(stored * per_row + k) * 16], scale, out + (r * per_row + k) * 17);
        }
      }
      return Matrix{DType::mxfp4, rows, cols, out};
    };
    for (size_t e = 0; e < E; ++e) {
      read_expert(*gu_blocks, *gu_scales, e, 2 * I, H);
      auto gate = repack(gate_up_name, e, I, H, 0, 2);
      if (!gate) return gate.error();
      auto up = repack(gate_up_name, e, I, H, 1, 2);
      if (!up) return up.error();
      read_expert(*d_blocks, *d_scales, e, H, I);
      auto down = repack(down_name, e, H, I, 0, 1);
      if (!down) return down.error();
      w.experts[e].gate = *gate, w.experts[e].up = *up, w.experts[e].down = *down;
    }
  } else {  // a number format, inputs × outputs: transposed
    auto gate_up = need(gate_up_name, {E, H, 2 * I}, false);
    if (!gate_up) return gate_up.error();
    auto down = need(down_name, {E, I, H}, false);
    if (!down) return down.error();
    if (dtype_is_blocked(*gate_up->dtype) || dtype_is_blocked(*down->dtype))
      return fail("GPT-OSS's experts must be F32, F16, BF16 or MXFP4 blocks in a Hugging Face checkpoint");
    // Column `from + k·step` of each [rows_in][cols_in] expert slice becomes row k.
    auto transpose = [&](const FoundTensor& t, size_t expert, size_t rows_in, size_t cols_in, size_t from, size_t step) {
      const DType dt = *t.dtype;
      const size_t element = dtype_bytes(dt, 1), rows_out = cols_in / step;
      uint8_t* out = keep(m, rows_out * rows_in * element);
      const auto* in = static_cast<const uint8_t*>(t.data) + expert * rows_in * cols_in * element;
      for (size_t r = 0; r < rows_out; ++r)
        for (size_t k = 0; k < rows_in; ++k)
          std::memcpy(out + (r * rows_in + k) * element, in + (k * cols_in + from + r * step) * element, element);
      return Matrix{dt, rows_out, rows_in, out};
    };
    for (size_t e = 0; e < E; ++e) {
      ExpertWeights& ex = w.experts[e];
      ex.gate = transpose(*gate_up, e, H, 2 * I, 0, 2), ex.up = transpose(*gate_up, e, H, 2 * I, 1, 2), ex.down = transpose(*down, e, I, H, 0, 1);
    }
  }

  auto gate_up_bias = need(gate_up_name + "_bias", {E, 2 * I}, false);
  if (!gate_up_bias) return gate_up_bias.error();
  auto down_bias = need(down_name + "_bias", {E, H}, false);
  if (!down_bias) return down_bias.error();
  if (dtype_is_blocked(*gate_up_bias->dtype) || dtype_is_blocked(*down_bias->dtype))
    return fail("GPT-OSS's expert biases must be F32, F16 or BF16");
  const DType bias_type = *gate_up_bias->dtype;
  const size_t element = dtype_bytes(bias_type, 1);
  for (size_t e = 0; e < E; ++e) {
    const auto* in = static_cast<const uint8_t*>(gate_up_bias->data) + e * 2 * I * element;
    uint8_t* gate = keep(m, I * element);
    uint8_t* up = keep(m, I * element);
    for (size_t i = 0; i < I; ++i) {
      std::memcpy(gate + i * element, in + 2 * i * element, element);
      std::memcpy(up + i * element, in + (2 * i + 1) * element, element);
    }
    w.experts[e].gate_bias = {bias_type, 1, I, gate};
    w.experts[e].up_bias = {bias_type, 1, I, up};
    w.experts[e].down_bias = {*down_bias->dtype, 1, H,
                              static_cast<const uint8_t*>(down_bias->data) + e * dtype_bytes(*down_bias->dtype, H)};
  }
  return Ok{};
}

}  // namespace larql
