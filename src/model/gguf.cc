#include "model/gguf.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <stdexcept>

namespace larql {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" little-endian
constexpr size_t kMaxDims = 4;           // GGML_MAX_DIMS

const char* const kGgmlTypeNames[] = {
    "F32",     "F16",    "Q4_0",    "Q4_1",  "Q4_2",  "Q4_3",   "Q5_0",  "Q5_1", "Q8_0", "Q8_1",   "Q2_K",   "Q3_K",
    "Q4_K",    "Q5_K",   "Q6_K",    "Q8_K",  "IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S", "IQ4_NL", "IQ3_S", "IQ2_S", "IQ4_XS",
    "I8",      "I16",    "I32",     "I64",   "F64",   "IQ1_M",  "BF16",  "Q4_0_4_4", "Q4_0_4_8", "Q4_0_8_8", "TQ1_0", "TQ2_0"};

struct ParseError {
  std::string what;
};

// Reads little-endian values from the header, never past its end.
class Cursor {
 public:
  Cursor(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  size_t pos() const { return pos_; }
  size_t left() const { return size_ - pos_; }

  template <typename T>
  T read(const char* what) {
    if (left() < sizeof(T))
      throw ParseError{"truncated header: " + std::string(what) + " needs " + std::to_string(sizeof(T)) + " bytes at offset " +
                       std::to_string(pos_) + ", the file ends at " + std::to_string(size_)};
    T v;
    std::memcpy(&v, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  // n bytes (the caller checked that they are there) into `to`.
  void copy(uint8_t* to, size_t n, const char* what) {
    if (left() < n) throw ParseError{"truncated header: " + std::string(what) + " needs " + std::to_string(n) + " bytes"};
    std::memcpy(to, data_ + pos_, n);
    pos_ += n;
  }
  std::string string(const std::string& what) {
    const uint64_t n = read<uint64_t>(what.c_str());
    if (n > left())
      throw ParseError{what + ": a string of " + std::to_string(n) + " bytes at offset " + std::to_string(pos_) +
                       " runs past the end of the file (" + std::to_string(left()) + " bytes left)"};
    std::string s(reinterpret_cast<const char*>(data_ + pos_), size_t(n));
    pos_ += size_t(n);
    return s;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

size_t scalar_size(GgufValueType t) {
  switch (t) {
    case GgufValueType::u8:
    case GgufValueType::i8:
    case GgufValueType::boolean: return 1;
    case GgufValueType::u16:
    case GgufValueType::i16: return 2;
    case GgufValueType::u32:
    case GgufValueType::i32:
    case GgufValueType::f32: return 4;
    case GgufValueType::u64:
    case GgufValueType::i64:
    case GgufValueType::f64: return 8;
    case GgufValueType::string: return 8;  // at least its length
    case GgufValueType::array: return 12;  // at least its element type and count
  }
  return 1;
}

GgufValueType value_type(uint32_t raw, const std::string& key) {
  if (raw > uint32_t(GgufValueType::f64))
    throw ParseError{"key '" + key + "' has value type " + std::to_string(raw) + ", expected 0 to 12"};
  return GgufValueType(raw);
}

template <typename T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// A numeric or bool scalar of type t stored at p, as integer and real.
void decode_number(const uint8_t* p, GgufValueType t, int64_t& integer, double& real) {
  switch (t) {
    case GgufValueType::u8: integer = load<uint8_t>(p); break;
    case GgufValueType::i8: integer = load<int8_t>(p); break;
    case GgufValueType::boolean: integer = load<uint8_t>(p) != 0; break;
    case GgufValueType::u16: integer = load<uint16_t>(p); break;
    case GgufValueType::i16: integer = load<int16_t>(p); break;
    case GgufValueType::u32: integer = load<uint32_t>(p); break;
    case GgufValueType::i32: integer = load<int32_t>(p); break;
    case GgufValueType::u64: integer = int64_t(load<uint64_t>(p)); break;
    case GgufValueType::i64: integer = load<int64_t>(p); break;
    case GgufValueType::f32: real = load<float>(p); integer = 0; return;
    case GgufValueType::f64: real = load<double>(p); integer = 0; return;
    case GgufValueType::string:
    case GgufValueType::array: return;
  }
  real = double(integer);
}

// Bytes of memory the metadata read so far holds, against what the file may ask for.
struct MetadataBudget {
  size_t left;
  void take(size_t bytes, const std::string& key) {
    if (bytes > left)
      throw ParseError{"key '" + key + "' would take the metadata past " + std::to_string((kGgufMetadataSlack >> 20)) +
                       " MiB beyond twice the file's size in memory; a GGUF file's metadata is far smaller"};
    left -= bytes;
  }
};

GgufValue read_value(Cursor& c, GgufValueType t, const std::string& key, MetadataBudget& budget) {
  GgufValue v;
  v.type = t;
  budget.take(sizeof(GgufValue) + key.size(), key);
  if (t == GgufValueType::string) {
    v.text = c.string("key '" + key + "'");
    budget.take(v.text.size(), key);
  } else if (t == GgufValueType::array) {
    v.element = value_type(c.read<uint32_t>(key.c_str()), key);
    if (v.element == GgufValueType::array) throw ParseError{"key '" + key + "' is an array of arrays, which larql does not read"};
    const uint64_t n = c.read<uint64_t>(key.c_str());
    if (n > c.left() / scalar_size(v.element))
      throw ParseError{"key '" + key + "': an array of " + std::to_string(n) + " elements runs past the end of the file"};
    if (v.element == GgufValueType::string) {
      budget.take(size_t(n) * sizeof(std::string), key);
      v.strings.reserve(size_t(n));
      for (uint64_t i = 0; i < n; ++i) {
        v.strings.push_back(c.string("key '" + key + "' element " + std::to_string(i)));
        budget.take(v.strings.back().size(), key);
      }
    } else {
      const size_t bytes = size_t(n) * scalar_size(v.element);
      budget.take(bytes, key);
      v.elements.resize(bytes);
      c.copy(v.elements.data(), bytes, key.c_str());
    }
  } else {
    uint8_t raw[8];
    c.copy(raw, scalar_size(t), key.c_str());
    decode_number(raw, t, v.integer, v.real);
  }
  return v;
}

bool is_power_of_two(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

GgufFile parse(const uint8_t* data, size_t size, const std::string& name) {
  Cursor c(data, size);
  if (size < 4 || c.read<uint32_t>("magic") != kMagic)
    throw ParseError{"not a GGUF file: it does not start with the magic bytes \"GGUF\""};
  GgufFile f;
  f.version = c.read<uint32_t>("version");
  if (f.version == 0x03000000u || f.version == 0x02000000u)
    throw ParseError{"a big-endian GGUF file; larql reads little-endian GGUF only"};
  if (f.version != 2 && f.version != 3)
    throw ParseError{"GGUF version " + std::to_string(f.version) + " is not supported; expected 2 or 3"};
  const uint64_t tensor_count = c.read<uint64_t>("tensor count");
  const uint64_t kv_count = c.read<uint64_t>("metadata count");
  if (kv_count > c.left() / 12 || tensor_count > c.left() / 24)
    throw ParseError{"the header claims " + std::to_string(kv_count) + " metadata keys and " + std::to_string(tensor_count) +
                     " tensors, more than the file's " + std::to_string(size) + " bytes can hold"};
  MetadataBudget budget{kGgufMetadataSlack + 2 * size};
  for (uint64_t i = 0; i < kv_count; ++i) {
    const std::string key = c.string("metadata key #" + std::to_string(i));
    const GgufValueType t = value_type(c.read<uint32_t>(key.c_str()), key);
    GgufValue v = read_value(c, t, key, budget);
    if (!f.metadata.emplace(key, std::move(v)).second) throw ParseError{"key '" + key + "' appears twice"};
  }
  if (const GgufValue* a = f.find("general.alignment")) {
    if (a->type != GgufValueType::u32 || !is_power_of_two(uint64_t(a->integer)))
      throw ParseError{"general.alignment must be a u32 power of two, got " + std::to_string(a->integer)};
    f.alignment = size_t(a->integer);
  }

  struct Pending {
    std::string name;
    GgufTensor tensor;
    uint64_t offset;
    uint64_t values;
  };
  std::vector<Pending> pending;
  for (uint64_t i = 0; i < tensor_count; ++i) {
    Pending p;
    p.name = c.string("tensor #" + std::to_string(i) + " name");
    const std::string what = "tensor '" + p.name + "'";
    const uint32_t dims = c.read<uint32_t>(what.c_str());
    if (dims == 0 || dims > kMaxDims)
      throw ParseError{what + " has " + std::to_string(dims) + " dimensions, expected 1 to " + std::to_string(kMaxDims)};
    p.values = 1;
    for (uint32_t d = 0; d < dims; ++d) {
      const uint64_t n = c.read<uint64_t>(what.c_str());
      if (n == 0 || __builtin_mul_overflow(p.values, n, &p.values) || p.values > (uint64_t(1) << 48))
        throw ParseError{what + " has dimension " + std::to_string(d) + " = " + std::to_string(n) +
                         ", which is zero or makes the tensor impossibly large"};
      p.tensor.shape.insert(p.tensor.shape.begin(), size_t(n));  // GGUF lists the innermost first
    }
    p.tensor.ggml_type = c.read<uint32_t>(what.c_str());
    p.tensor.dtype = dtype_from_ggml(p.tensor.ggml_type);
    p.offset = c.read<uint64_t>(what.c_str());
    if (p.offset % f.alignment != 0)
      throw ParseError{what + " starts at data offset " + std::to_string(p.offset) + ", not a multiple of the alignment " +
                       std::to_string(f.alignment)};
    p.tensor.file = name;
    pending.push_back(std::move(p));
  }
  const size_t data_start = (c.pos() + f.alignment - 1) / f.alignment * f.alignment;
  for (auto& p : pending) {
    const std::string what = "tensor '" + p.name + "'";
    if (p.tensor.dtype) {
      const auto& traits = dtype_traits(*p.tensor.dtype);
      if (p.tensor.shape.back() % traits.block_values != 0)
        throw ParseError{what + " is " + std::string(traits.name) + " with rows of " + std::to_string(p.tensor.shape.back()) +
                         " values, not a multiple of its " + std::to_string(traits.block_values) + "-value blocks"};
      p.tensor.bytes = dtype_bytes(*p.tensor.dtype, size_t(p.values));
      if (data_start > size || p.offset > size - data_start || p.tensor.bytes > size - data_start - p.offset)
        throw ParseError{what + " lies at bytes [" + std::to_string(data_start + p.offset) + ", " +
                         std::to_string(data_start + p.offset + p.tensor.bytes) + "), outside the " + std::to_string(size) +
                         "-byte file"};
      p.tensor.data = data + data_start + p.offset;
    }
    if (!f.tensors.emplace(p.name, std::move(p.tensor)).second) throw ParseError{what + " appears twice"};
  }
  return f;
}

// "NAME-00001-of-00003.gguf" → ("NAME", 3); nullopt for other names.
std::optional<std::pair<std::string, size_t>> split_name(const std::string& path) {
  static const std::regex pattern(R"((.*)-(\d{5})-of-(\d{5})\.gguf)");
  std::smatch m;
  if (!std::regex_match(path, m, pattern)) return std::nullopt;
  return std::pair{m[1].str(), size_t(std::stoul(m[3].str()))};
}

std::string split_path(const std::string& prefix, size_t index, size_t count) {
  char tail[64];
  std::snprintf(tail, sizeof tail, "-%05zu-of-%05zu.gguf", index, count);
  return prefix + tail;
}

Result<GgufFile> read_one(const std::string& path) {
  auto mapped = MappedFile::open(path);
  if (!mapped) return mapped.error();
  auto f = parse_gguf((*mapped)->data(), (*mapped)->size(), path);
  if (!f) return f.error();
  f->files.push_back(*mapped);
  return f;
}

// --- writing ---

void put_bytes(std::string& out, const void* p, size_t n) { out.append(static_cast<const char*>(p), n); }
template <typename T>
void put(std::string& out, T v) {
  put_bytes(out, &v, sizeof v);
}
void put_string(std::string& out, const std::string& s) {
  put<uint64_t>(out, s.size());
  out += s;
}

void put_number(std::string& out, GgufValueType t, double v) {
  switch (t) {
    case GgufValueType::u8: put<uint8_t>(out, uint8_t(v)); return;
    case GgufValueType::i8: put<int8_t>(out, int8_t(v)); return;
    case GgufValueType::boolean: put<uint8_t>(out, v != 0); return;
    case GgufValueType::u16: put<uint16_t>(out, uint16_t(v)); return;
    case GgufValueType::i16: put<int16_t>(out, int16_t(v)); return;
    case GgufValueType::u32: put<uint32_t>(out, uint32_t(v)); return;
    case GgufValueType::i32: put<int32_t>(out, int32_t(v)); return;
    case GgufValueType::u64: put<uint64_t>(out, uint64_t(v)); return;
    case GgufValueType::i64: put<int64_t>(out, int64_t(v)); return;
    case GgufValueType::f32: put<float>(out, float(v)); return;
    case GgufValueType::f64: put<double>(out, v); return;
    case GgufValueType::string:
    case GgufValueType::array: return;
  }
}

void put_value(std::string& out, const GgufValue& v) {
  put<uint32_t>(out, uint32_t(v.type));
  if (v.type == GgufValueType::string) {
    put_string(out, v.text);
  } else if (v.type == GgufValueType::array) {
    put<uint32_t>(out, uint32_t(v.element));
    if (v.element == GgufValueType::string) {
      put<uint64_t>(out, v.strings.size());
      for (const auto& s : v.strings) put_string(out, s);
    } else {
      put<uint64_t>(out, v.count());
      out.append(reinterpret_cast<const char*>(v.elements.data()), v.elements.size());
    }
  } else {
    put_number(out, v.type, v.real);
  }
}

}  // namespace

GgufValue GgufValue::of(GgufValueType type, double v) {
  GgufValue out;
  out.type = type;
  out.real = v;
  out.integer = int64_t(v);
  return out;
}
GgufValue GgufValue::of_string(std::string s) {
  GgufValue out;
  out.type = GgufValueType::string;
  out.text = std::move(s);
  return out;
}
GgufValue GgufValue::of_strings(std::vector<std::string> v) {
  GgufValue out;
  out.type = GgufValueType::array;
  out.element = GgufValueType::string;
  out.strings = std::move(v);
  return out;
}
GgufValue GgufValue::of_array(GgufValueType element, std::vector<double> v) {
  GgufValue out;
  out.type = GgufValueType::array;
  out.element = element;
  std::string bytes;
  for (double r : v) put_number(bytes, element, r);
  out.elements.assign(bytes.begin(), bytes.end());
  return out;
}

size_t GgufValue::count() const {
  if (type != GgufValueType::array) return 0;
  return element == GgufValueType::string ? strings.size() : elements.size() / scalar_size(element);
}

namespace {

// Element i of a numeric or bool array, as integer and real.
void decode_element(const GgufValue& v, size_t i, int64_t& integer, double& real) {
  if (i >= v.count() || v.element == GgufValueType::string) throw std::out_of_range("GGUF array element " + std::to_string(i));
  decode_number(v.elements.data() + i * scalar_size(v.element), v.element, integer, real);
}

}  // namespace

int64_t GgufValue::integer_at(size_t i) const {
  int64_t integer = 0;
  double real = 0;
  decode_element(*this, i, integer, real);
  return element == GgufValueType::f32 || element == GgufValueType::f64 ? int64_t(real) : integer;
}

double GgufValue::real_at(size_t i) const {
  int64_t integer = 0;
  double real = 0;
  decode_element(*this, i, integer, real);
  return real;
}

const GgufValue* GgufFile::find(const std::string& key) const {
  auto it = metadata.find(key);
  return it == metadata.end() ? nullptr : &it->second;
}

const GgufValue* GgufFile::number(const std::string& key) const {
  const GgufValue* v = find(key);
  return v && v->type != GgufValueType::string && v->type != GgufValueType::array ? v : nullptr;
}

int64_t GgufFile::integer_or(const std::string& key, int64_t fallback) const {
  const GgufValue* v = number(key);
  return v ? v->integer : fallback;
}

std::string ggml_type_name(uint32_t t) {
  return t < std::size(kGgmlTypeNames) ? kGgmlTypeNames[t] : "type " + std::to_string(t);
}

bool is_gguf_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  uint32_t magic = 0;
  return in.read(reinterpret_cast<char*>(&magic), 4) && magic == kMagic;
}

Result<GgufFile> parse_gguf(const uint8_t* data, size_t size, const std::string& name) {
  try {
    return parse(data, size, name);
  } catch (const ParseError& e) {
    return make_error(ErrorCode::invalid_argument, name + ": " + e.what);
  } catch (const std::bad_alloc&) {
    return make_error(ErrorCode::invalid_argument, name + ": the header needs more memory than is available");
  }
}

Result<GgufFile> read_gguf(const std::string& path) {
  auto first = read_one(path);
  if (!first) return first.error();
  const int64_t count = first->integer_or("split.count", 1);
  if (count <= 1) return first;
  const auto split = split_name(path);
  if (!split || split->second != size_t(count) || first->integer_or("split.no", 0) != 0)
    return make_error(ErrorCode::invalid_argument, path + ": split.count is " + std::to_string(count) +
                                                       "; give the first file, named NAME-00001-of-" +
                                                       split_path("", 0, size_t(count)).substr(10));
  for (size_t i = 2; i <= size_t(count); ++i) {
    const std::string part = split_path(split->first, i, size_t(count));
    auto next = read_one(part);
    if (!next) return next.error();
    if (next->integer_or("split.no", -1) != int64_t(i - 1))
      return make_error(ErrorCode::invalid_argument, part + ": split.no is not " + std::to_string(i - 1));
    for (auto& [name, t] : next->tensors)
      if (!first->tensors.emplace(name, std::move(t)).second)
        return make_error(ErrorCode::invalid_argument, part + ": tensor '" + name + "' is also in an earlier split");
    first->files.push_back(next->files.front());
  }
  return first;
}

Result<std::vector<std::string>> write_gguf(const std::string& path, const std::map<std::string, GgufValue>& metadata,
                                            const std::vector<GgufTensorToWrite>& tensors, size_t splits, size_t alignment) {
  if (splits == 0 || splits > tensors.size() + 1 || !is_power_of_two(alignment))
    return make_error(ErrorCode::invalid_argument, "write_gguf: need 1 to " + std::to_string(tensors.size()) +
                                                       " splits and a power-of-two alignment");
  std::vector<std::string> paths;
  std::string prefix = path;
  if (splits > 1 && prefix.ends_with(".gguf")) prefix.resize(prefix.size() - 5);
  const size_t per_split = (tensors.size() + splits - 1) / splits;
  for (size_t s = 0; s < splits; ++s) {
    const size_t begin = std::min(tensors.size(), s * per_split), end = std::min(tensors.size(), begin + per_split);
    std::map<std::string, GgufValue> meta;
    if (s == 0) meta = metadata;
    if (alignment != 32) meta["general.alignment"] = GgufValue::of(GgufValueType::u32, double(alignment));
    if (splits > 1) {
      meta["split.no"] = GgufValue::of(GgufValueType::u16, double(s));
      meta["split.count"] = GgufValue::of(GgufValueType::u16, double(splits));
      meta["split.tensors.count"] = GgufValue::of(GgufValueType::i32, double(tensors.size()));
    }
    std::string head;
    put<uint32_t>(head, kMagic);
    put<uint32_t>(head, 3);
    put<uint64_t>(head, end - begin);
    put<uint64_t>(head, meta.size());
    for (const auto& [key, value] : meta) {
      put_string(head, key);
      put_value(head, value);
    }
    uint64_t offset = 0;
    for (size_t i = begin; i < end; ++i) {
      const auto& t = tensors[i];
      if (t.bytes.size() != dtype_bytes(t.dtype, [&] {
            size_t n = 1;
            for (size_t d : t.shape) n *= d;
            return n;
          }()))
        return make_error(ErrorCode::internal, "write_gguf: tensor '" + t.name + "' has the wrong byte count");
      put_string(head, t.name);
      put<uint32_t>(head, uint32_t(t.shape.size()));
      for (auto d = t.shape.rbegin(); d != t.shape.rend(); ++d) put<uint64_t>(head, *d);
      put<uint32_t>(head, dtype_traits(t.dtype).ggml_type);
      put<uint64_t>(head, offset);
      offset += (t.bytes.size() + alignment - 1) / alignment * alignment;
    }
    head.append((alignment - head.size() % alignment) % alignment, '\0');
    const std::string file = splits > 1 ? split_path(prefix, s + 1, splits) : path;
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    if (!out) return make_error(ErrorCode::invalid_argument, "cannot write " + file);
    out.write(head.data(), std::streamsize(head.size()));
    for (size_t i = begin; i < end; ++i) {
      const auto& bytes = tensors[i].bytes;
      out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
      const std::string pad((alignment - bytes.size() % alignment) % alignment, '\0');
      out.write(pad.data(), std::streamsize(pad.size()));
    }
    if (!out) return make_error(ErrorCode::invalid_argument, "failed writing " + file);
    paths.push_back(file);
  }
  return paths;
}

}  // namespace larql
