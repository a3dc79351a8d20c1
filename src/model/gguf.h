// The GGUF container (llama.cpp's model file): a little-endian header of typed key/value
// metadata and tensor descriptions, then tensor data at `general.alignment`. Versions 2
// and 3. Reading maps the file and validates every length and range against it; writing
// is for `larql quantize`, test fixtures and split files.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/dtype.h"
#include "model/mapped_file.h"

namespace larql {

enum class GgufValueType : uint32_t { u8, i8, u16, i16, u32, i32, f32, boolean, string, array, u64, i64, f64 };

// One metadata value. Scalars: `integer` for integer types and bool, `real` for every
// numeric type. Arrays (of arrays are refused): `strings`, or numbers kept as the file
// stores them (`elements`, little-endian, read with integer_at/real_at), so that a file's
// array costs its own bytes in memory, not 16 per element.
struct GgufValue {
  GgufValueType type = GgufValueType::u32;
  GgufValueType element = GgufValueType::u32;  // arrays only
  int64_t integer = 0;
  double real = 0;
  std::string text;
  std::vector<std::string> strings;
  std::vector<uint8_t> elements;

  size_t count() const;                 // an array's elements
  int64_t integer_at(size_t i) const;   // element i of a numeric or bool array, as an integer
  double real_at(size_t i) const;       // and as a real

  static GgufValue of(GgufValueType type, double v);  // numeric or bool scalar
  static GgufValue of_string(std::string s);
  static GgufValue of_strings(std::vector<std::string> v);
  static GgufValue of_array(GgufValueType element, std::vector<double> v);
};

// What reading a file's metadata may take in memory, at most: this much beyond twice the
// file's size (every key, string and array element counted as held), so that a crafted
// header cannot ask for gigabytes before a tensor is read.
inline constexpr size_t kGgufMetadataSlack = size_t(16) << 20;

struct GgufTensor {
  uint32_t ggml_type = 0;
  std::optional<DType> dtype;  // nullopt: a GGML type larql does not compute on
  std::vector<size_t> shape;   // row-major: GGUF's dimensions reversed
  const uint8_t* data = nullptr;
  size_t bytes = 0;
  std::string file;
};

struct GgufFile {
  uint32_t version = 3;
  size_t alignment = 32;
  std::vector<std::shared_ptr<MappedFile>> files;  // one per split
  std::map<std::string, GgufValue> metadata;
  std::map<std::string, GgufTensor> tensors;

  const GgufValue* find(const std::string& key) const;
  // A numeric or bool scalar; nullptr when the key is absent or a string or array.
  const GgufValue* number(const std::string& key) const;
  int64_t integer_or(const std::string& key, int64_t fallback) const;
};

// GGML's name of a type id ("Q4_K", "F16", ...), or "type N" for ids it does not know.
std::string ggml_type_name(uint32_t ggml_type);

// Whether the file at `path` starts with the GGUF magic.
bool is_gguf_file(const std::string& path);

// Parses one file's bytes. Errors name `name`, the key or tensor, and what was expected.
Result<GgufFile> parse_gguf(const uint8_t* data, size_t size, const std::string& name);

// Maps and parses `path`; a split model's first file (NAME-00001-of-0000N.gguf, with the
// split.count key) brings in the others.
Result<GgufFile> read_gguf(const std::string& path);

struct GgufTensorToWrite {
  std::string name;
  DType dtype;
  std::vector<size_t> shape;  // row-major
  std::vector<uint8_t> bytes;
};

// Writes a GGUF v3 file. With splits > 1, writes NAME-0000i-of-0000N.gguf files holding
// consecutive tensors (metadata in the first; split.* keys in each) and returns their paths.
Result<std::vector<std::string>> write_gguf(const std::string& path, const std::map<std::string, GgufValue>& metadata,
                                            const std::vector<GgufTensorToWrite>& tensors, size_t splits = 1,
                                            size_t alignment = 32);

}  // namespace larql
