#include "model/safetensors.h"

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "base/f16.h"
#include "kernels/block_formats.h"

namespace larql {
namespace {

std::optional<DType> dtype_from_safetensors(const std::string& s) {
  if (s == "F32") return DType::f32;
  if (s == "F16") return DType::f16;
  if (s == "BF16") return DType::bf16;
  return std::nullopt;
}

const char* safetensors_dtype(DType t) {
  switch (t) {
    case DType::f32: return "F32";
    case DType::f16: return "F16";
    case DType::bf16: return "BF16";
    case DType::q8_0:
    case DType::q4_0:
    case DType::q4_1:
    case DType::q5_0:
    case DType::q5_1:
    case DType::q4_k:
    case DType::q5_k:
    case DType::q6_k:
    case DType::mxfp4: break;  // GGML block formats have no safetensors name
  }
  return nullptr;
}

}  // namespace

Result<SafetensorsFile> read_safetensors(const std::string& path) {
  auto file = MappedFile::open(path);
  if (!file) return file.error();
  const auto& f = **file;
  auto fail = [&](const std::string& what) { return make_error(ErrorCode::invalid_argument, path + ": " + what); };
  if (f.size() < 8) return fail("too short for a safetensors header");
  uint64_t header_len;
  std::memcpy(&header_len, f.data(), 8);
  if (header_len > f.size() - 8) return fail("header length " + std::to_string(header_len) + " exceeds the file");
  auto header = nlohmann::json::parse(f.data() + 8, f.data() + 8 + header_len, nullptr, false);
  if (header.is_discarded() || !header.is_object()) return fail("header is not a JSON object");
  const uint8_t* data = f.data() + 8 + header_len;
  const size_t data_size = f.size() - 8 - header_len;

  SafetensorsFile out{*file, {}};
  for (const auto& item : header.items()) {
    const std::string& name = item.key();
    const auto& info = item.value();
    if (name == "__metadata__") continue;
    auto tensor_fail = [&](const std::string& what) { return fail("tensor '" + name + "': " + what); };
    if (!info.is_object() || !info.contains("dtype") || !info.contains("shape") || !info.contains("data_offsets"))
      return tensor_fail("needs dtype, shape and data_offsets");
    if (!info["dtype"].is_string()) return tensor_fail("dtype is not a string");
    const bool raw = info["dtype"].get<std::string>() == "U8";
    auto dtype = raw ? std::optional<DType>(DType::f32) : dtype_from_safetensors(info["dtype"].get<std::string>());
    if (!dtype) return tensor_fail("dtype " + info["dtype"].get<std::string>() + " is not supported; expected F32, F16, BF16 or U8");
    TensorInfo t{*dtype, {}, nullptr, 0, raw};
    const size_t element_bytes = raw ? 1 : dtype_bytes(*dtype, 1);
    size_t count = 1;
    for (const auto& d : info["shape"]) {
      if (!d.is_number_unsigned()) return tensor_fail("shape holds a non-integer");
      t.shape.push_back(d.get<size_t>());
      if (__builtin_mul_overflow(count, t.shape.back(), &count)) return tensor_fail("shape overflows");
    }
    const auto& off = info["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      return tensor_fail("data_offsets must be two integers");
    const size_t begin = off[0].get<size_t>(), end = off[1].get<size_t>();
    size_t expected = 0;
    if (__builtin_mul_overflow(count, element_bytes, &expected) || end < begin || end > data_size ||
        end - begin != expected)
      return tensor_fail("byte range [" + std::to_string(begin) + ", " + std::to_string(end) + ") does not fit the " +
                         std::to_string(data_size) + "-byte data section or the shape's " + std::to_string(expected) + " bytes");
    t.data = data + begin;
    t.bytes = expected;
    out.tensors.emplace(name, std::move(t));
  }
  return out;
}

size_t TensorSpec::bytes() const {
  size_t n = 1;
  for (size_t d : shape) n *= d;
  return raw_bytes ? n : dtype_bytes(dtype, n);
}

Status write_safetensors(const std::string& path, const std::vector<TensorSpec>& specs,
                         const std::function<std::vector<uint8_t>(size_t index)>& fill) {
  nlohmann::json header = nlohmann::json::object();
  size_t offset = 0;
  for (const auto& t : specs) {
    if (!t.raw_bytes && !safetensors_dtype(t.dtype))
      return make_error(ErrorCode::invalid_argument, "tensor '" + t.name + "': safetensors cannot hold " +
                                                         std::string(dtype_name(t.dtype)) + " (GGUF can)");
    header[t.name] = {{"dtype", t.raw_bytes ? "U8" : safetensors_dtype(t.dtype)}, {"shape", t.shape},
                      {"data_offsets", {offset, offset + t.bytes()}}};
    offset += t.bytes();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // align the data section, as the reference writer does
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return make_error(ErrorCode::invalid_argument, "cannot write " + path);
  const uint64_t len = text.size();
  out.write(reinterpret_cast<const char*>(&len), 8);
  out.write(text.data(), std::streamsize(text.size()));
  for (size_t i = 0; i < specs.size(); ++i) {
    const auto bytes = fill(i);
    if (bytes.size() != specs[i].bytes())
      return make_error(ErrorCode::internal, "tensor '" + specs[i].name + "' was given " + std::to_string(bytes.size()) +
                                                 " bytes, its shape needs " + std::to_string(specs[i].bytes()));
    out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  }
  if (!out) return make_error(ErrorCode::invalid_argument, "failed writing " + path);
  return Ok{};
}

Status write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors) {
  std::vector<TensorSpec> specs;
  for (const auto& t : tensors) specs.push_back({t.name, t.dtype, t.shape});
  return write_safetensors(path, specs, [&](size_t i) { return tensors[i].bytes; });
}

std::vector<uint8_t> encode_tensor(DType dtype, const std::vector<float>& values) {
  std::vector<uint8_t> out(dtype_bytes(dtype, values.size()));
  blocks::quantize_row(dtype, values.data(), values.size(), out.data());
  return out;
}

}  // namespace larql
