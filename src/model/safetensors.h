// The safetensors format: u64 LE header length, a JSON header naming each tensor's dtype,
// shape and byte range, then the data. Reading maps the file and validates every range;
// writing is for `larql synth` and test fixtures.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kernels/dtype.h"
#include "model/mapped_file.h"

namespace larql {

struct TensorInfo {
  DType dtype;
  std::vector<size_t> shape;
  const uint8_t* data;
  size_t bytes;
  // "U8": bytes with no number format of their own (GPT-OSS's MXFP4 blocks and scales,
  // which only their loader reads); `dtype` means nothing then.
  bool raw_bytes = false;
};

struct SafetensorsFile {
  std::shared_ptr<MappedFile> file;
  std::map<std::string, TensorInfo> tensors;
};

// Fails with a message naming the file and the tensor for a bad header, an unsupported
// dtype (we take F32, F16, BF16 and U8) or a byte range outside the file or of the wrong size.
Result<SafetensorsFile> read_safetensors(const std::string& path);

struct TensorSpec {
  std::string name;
  DType dtype;
  std::vector<size_t> shape;
  bool raw_bytes = false;  // written as "U8", one byte per element (dtype ignored)
  size_t bytes() const;
};

// Writes tensors one at a time: `fill(i)` returns the bytes of specs[i] (in its dtype,
// little-endian), so a large checkpoint never has to be in memory whole.
Status write_safetensors(const std::string& path, const std::vector<TensorSpec>& specs,
                         const std::function<std::vector<uint8_t>(size_t index)>& fill);

struct TensorToWrite {
  std::string name;
  DType dtype;
  std::vector<size_t> shape;
  std::vector<uint8_t> bytes;  // already in `dtype`, little-endian
};

Status write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors);

// Converts f32 values to the bytes of `dtype` (round to nearest even).
std::vector<uint8_t> encode_tensor(DType dtype, const std::vector<float>& values);

}  // namespace larql
