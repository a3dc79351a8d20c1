#include "wire/codec.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>

#include "base/byte_io.h"
#include "wire/i8_block.h"
#include "wire/kernels.h"
#include "wire/q8_block.h"

namespace larql::wire {
namespace {

constexpr size_t kSingleRequestHeader = 16;   // layer, seq_len, flags, top_k
constexpr size_t kBatchRequestFixed = 8 + 12;  // marker, K ... seq_len, flags, top_k
constexpr size_t kResponseHeader = 12;         // layer|marker, seq_len|R, latency_ms
constexpr size_t kRecordHeader = 12;           // layer, seq_len, count

std::string str(size_t v) { return std::to_string(v); }

std::string describe_expected(Encoding e, size_t rows, size_t hidden) {
  std::string shape = "seq_len=" + str(rows) + " × hidden=" + str(hidden);
  auto bytes = values_byte_size(e, rows, hidden);
  std::string size = bytes ? str(*bytes) + " bytes" : "an unrepresentable size";
  switch (e) {
    case Encoding::i8: return str(rows) + " i8 blocks of 8+" + str(hidden) + " bytes = " + size + " (" + shape + ")";
    case Encoding::q8:
      return str(rows * (hidden / kQ8BlockValues)) + " q8 blocks of 34 bytes = " + size + " (" + shape + ")";
    case Encoding::f32:
    case Encoding::f16: break;
  }
  return str(rows * hidden) + " " + std::string(encoding_name(e)) + " values = " + size + " (" + shape + ")";
}

}  // namespace

Status check_value_bytes(Encoding e, size_t have, size_t rows, size_t hidden, const char* what) {
  if (rows == 0) return make_error(ErrorCode::bad_seq_len, "seq_len is 0; expected at least 1");
  if (!encoding_fits_hidden(e, hidden))
    return make_error(ErrorCode::unsupported_media_type,
                      std::string(encoding_name(e)) + " needs a hidden size that is a multiple of " +
                          str(kQ8BlockValues) + "; this model's is " + str(hidden));
  auto need = values_byte_size(e, rows, hidden);
  if (!need)
    return make_error(ErrorCode::bad_seq_len, "seq_len=" + str(rows) + " × hidden=" + str(hidden) +
                                                  " overflows the size arithmetic");
  if (have < *need)
    return make_error(ErrorCode::truncated, std::string("body ends inside the ") + what + ": it has " + str(have) +
                                                " bytes, expected " + describe_expected(e, rows, hidden));
  if (have > *need)
    return make_error(ErrorCode::bad_length, std::string(what) + " has " + str(have) + " bytes, expected " +
                                                 describe_expected(e, rows, hidden) + "; trailing bytes are not allowed");
  return Ok{};
}

bool write_values(Encoding e, const float* in, size_t rows, size_t hidden, uint8_t* dst) {
  const WireKernels& k = best_kernels();
  switch (e) {
    case Encoding::f32: return k.encode_f32(in, rows * hidden, dst);
    case Encoding::f16: return k.encode_f16(in, rows * hidden, dst);
    case Encoding::q8: return k.encode_q8(in, rows * hidden, dst);
    case Encoding::i8: {
      const size_t block = kI8BlockHeaderBytes + hidden;
      for (size_t r = 0; r < rows; ++r)
        if (!k.encode_i8_row(in + r * hidden, hidden, dst + r * block)) return false;
      return true;
    }
  }
  return false;
}

namespace {

// Names the first q8 block whose scale a decoder refuses.
std::string describe_bad_q8_block(Bytes values, size_t hidden) {
  const size_t per_row = hidden / kQ8BlockValues;
  for (size_t b = 0; b * kQ8BlockBytes < values.size(); ++b) {
    uint16_t d;
    std::memcpy(&d, values.data() + b * kQ8BlockBytes, 2);
    if (!q8_scale_is_valid(d)) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%04x", d);
      return "q8 block " + str(b % per_row) + " of position " + str(b / per_row) + " has scale " + hex + " (" +
             std::to_string(f16_to_f32(d)) + "); expected a finite, non-negative f16";
    }
  }
  return "no bad q8 block found";
}

}  // namespace

std::string first_non_finite(std::span<const float> values, size_t hidden) {
  for (size_t i = 0; i < values.size(); ++i)
    if (!std::isfinite(values[i]))
      return "position " + str(i / hidden) + ", index " + str(i % hidden) + " is " +
             (std::isnan(values[i]) ? "NaN" : (values[i] > 0 ? "+inf" : "-inf"));
  return "no non-finite value found";
}

// ---- requests ------------------------------------------------------------------------

namespace {

size_t request_header_size(const RequestHeader& h) {
  return h.layers.size() == 1 ? kSingleRequestHeader : kBatchRequestFixed + 4 * h.layers.size();
}

void write_request_header(const RequestHeader& h, uint8_t* p) {
  if (h.layers.size() == 1) {
    store_u32(p, h.layers[0]);
    p += 4;
  } else {
    store_u32(p, kBatchMarker);
    store_u32(p + 4, static_cast<uint32_t>(h.layers.size()));
    p += 8;
    for (uint32_t layer : h.layers) {
      store_u32(p, layer);
      p += 4;
    }
  }
  store_u32(p, h.seq_len);
  store_u32(p + 4, h.flags);
  store_u32(p + 8, h.top_k);
}

}  // namespace

Result<EncodeOutcome> encode_request(Encoding encoding, const RequestHeader& header, size_t hidden,
                                     std::span<const float> values, std::string& out) {
  if (header.layers.empty() || header.layers.size() > kMaxBatchLayers)
    return make_error(ErrorCode::bad_layer_count, "a request names " + str(header.layers.size()) +
                                                      " layers; expected 1 to " + str(kMaxBatchLayers));
  if (header.seq_len == 0) return make_error(ErrorCode::bad_seq_len, "seq_len is 0; expected at least 1");
  if (values.size() != size_t{header.seq_len} * hidden)
    return make_error(ErrorCode::bad_length, "residual has " + str(values.size()) + " values, expected " +
                                                 str(size_t{header.seq_len} * hidden) + " (seq_len=" +
                                                 str(header.seq_len) + " × hidden=" + str(hidden) + ")");
  if (!encoding_fits_hidden(encoding, hidden))
    return make_error(ErrorCode::unsupported_media_type, std::string(encoding_name(encoding)) +
                                                             " cannot carry hidden=" + str(hidden) +
                                                             " values per position (not a multiple of 32)");
  const size_t head = request_header_size(header);
  EncodeOutcome outcome{encoding, false};
  for (;;) {
    out.resize(head + *values_byte_size(outcome.encoding, header.seq_len, hidden));
    auto* p = reinterpret_cast<uint8_t*>(out.data());
    write_request_header(header, p);
    if (write_values(outcome.encoding, values.data(), header.seq_len, hidden, p + head)) return outcome;
    if (outcome.encoding == Encoding::f32)
      return make_error(ErrorCode::non_finite_input,
                        "request residual holds a non-finite value: " + first_non_finite(values, hidden));
    outcome = {Encoding::f32, true};
  }
}

void write_request_with_values(const RequestHeader& header, Bytes values, std::string& out) {
  const size_t head = request_header_size(header);
  out.resize(head + values.size());
  write_request_header(header, reinterpret_cast<uint8_t*>(out.data()));
  if (!values.empty()) std::memcpy(out.data() + head, values.data(), values.size());
}

Result<RequestView> parse_request(Bytes body, Encoding encoding, size_t hidden) {
  const size_t n = body.size();
  const uint8_t* p = body.data();
  RequestView view;
  RequestHeader& h = view.header;
  size_t head = 0;
  if (n >= 4 && load_u32(p) == kBatchMarker) {
    if (n < 8)
      return make_error(ErrorCode::truncated, "batch request ends inside its header: " + str(n) +
                                                  " bytes, expected at least 8 for the marker and layer count");
    const uint32_t k = load_u32(p + 4);
    if (k == 0 || k > kMaxBatchLayers)
      return make_error(ErrorCode::bad_layer_count,
                        "batch request names " + str(k) + " layers; expected 1 to " + str(kMaxBatchLayers));
    head = kBatchRequestFixed + 4 * size_t{k};
    if (n < head)
      return make_error(ErrorCode::truncated, "batch request ends inside its layer list or header: " + str(n) +
                                                  " bytes, expected " + str(head) + " for " + str(k) + " layers");
    h.batch = true;
    h.layers.resize(k);
    for (uint32_t i = 0; i < k; ++i) h.layers[i] = load_u32(p + 8 + 4 * size_t{i});
  } else {
    head = kSingleRequestHeader;
    if (n < head)
      return make_error(ErrorCode::truncated, "request ends inside its header: " + str(n) +
                                                  " bytes, expected at least 16 (layer, seq_len, flags, top_k)");
    h.layers = {load_u32(p)};
  }
  h.seq_len = load_u32(p + head - 12);
  h.flags = load_u32(p + head - 8);
  h.top_k = load_u32(p + head - 4);
  if (auto s = check_value_bytes(encoding, n - head, h.seq_len, hidden, "residual"); !s) return s.error();
  if (!(h.flags & kFlagFullOutput))
    return make_error(ErrorCode::full_output_required,
                      "flags=" + str(h.flags) + " has bit 0 (full_output) clear; the binary path requires it set");
  view.values = body.subspan(head);
  return view;
}

// ---- responses -----------------------------------------------------------------------

Result<EncodeOutcome> encode_response(Encoding encoding, std::span<const ResponseRecord> records,
                                      uint32_t seq_len, size_t hidden, float latency_ms, std::string& out) {
  if (records.size() > kMaxBatchLayers)
    return make_error(ErrorCode::bad_layer_count,
                      "a response holds " + str(records.size()) + " records; expected at most " + str(kMaxBatchLayers));
  if (seq_len == 0) return make_error(ErrorCode::bad_seq_len, "seq_len is 0; expected at least 1");
  const size_t count = size_t{seq_len} * hidden;
  for (const auto& r : records)
    if (r.values.size() != count)
      return make_error(ErrorCode::bad_length, "output for layer " + str(r.layer) + " has " + str(r.values.size()) +
                                                   " values, expected " + str(count) + " (seq_len=" +
                                                   str(seq_len) + " × hidden=" + str(hidden) + ")");
  const bool single = records.size() == 1;
  // An encoding that cannot carry this hidden size at all is a fallback like a value
  // that does not fit: the answer goes as f32.
  EncodeOutcome outcome = encoding_fits_hidden(encoding, hidden) ? EncodeOutcome{encoding, false}
                                                                 : EncodeOutcome{Encoding::f32, true};
  for (;;) {
    const size_t payload = *values_byte_size(outcome.encoding, seq_len, hidden);
    out.resize(single ? kResponseHeader + payload : kResponseHeader + records.size() * (kRecordHeader + payload));
    auto* p = reinterpret_cast<uint8_t*>(out.data());
    store_u32(p, single ? records[0].layer : kBatchMarker);
    store_u32(p + 4, single ? seq_len : static_cast<uint32_t>(records.size()));
    store_f32(p + 8, latency_ms);
    p += kResponseHeader;
    bool fits = true;
    for (size_t i = 0; i < records.size() && fits; ++i) {
      if (!single) {
        store_u32(p, records[i].layer);
        store_u32(p + 4, seq_len);
        store_u32(p + 8, static_cast<uint32_t>(count));
        p += kRecordHeader;
      }
      fits = write_values(outcome.encoding, records[i].values.data(), seq_len, hidden, p);
      p += payload;
      if (!fits && outcome.encoding == Encoding::f32)
        return make_error(ErrorCode::non_finite_output, "FFN output for layer " + str(records[i].layer) +
                                                            " holds a non-finite value: " +
                                                            first_non_finite(records[i].values, hidden));
    }
    if (fits) return outcome;
    outcome = {Encoding::f32, true};
  }
}

Result<ResponseView> parse_response(Bytes body, Encoding encoding, size_t hidden) {
  const size_t n = body.size();
  const uint8_t* p = body.data();
  if (n < kResponseHeader)
    return make_error(ErrorCode::truncated, "response ends inside its header: " + str(n) +
                                                " bytes, expected at least 12");
  ResponseView view;
  view.latency_ms = load_f32(p + 8);
  if (!std::isfinite(view.latency_ms))
    return make_error(ErrorCode::non_finite_input, "response latency_ms is not finite");
  if (load_u32(p) != kBatchMarker) {
    const uint32_t seq_len = load_u32(p + 4);
    if (auto s = check_value_bytes(encoding, n - kResponseHeader, seq_len, hidden, "output"); !s) return s.error();
    view.records.push_back({load_u32(p), seq_len, body.subspan(kResponseHeader), body});
    return view;
  }
  view.batch = true;
  const uint32_t r = load_u32(p + 4);
  if (r > kMaxBatchLayers)
    return make_error(ErrorCode::bad_layer_count,
                      "batch response holds " + str(r) + " records; expected at most " + str(kMaxBatchLayers));
  view.records.reserve(r);
  size_t offset = kResponseHeader;
  for (uint32_t i = 0; i < r; ++i) {
    if (n - offset < kRecordHeader)
      return make_error(ErrorCode::truncated, "batch response ends inside the header of record " + str(i) +
                                                  " of " + str(r));
    const uint32_t layer = load_u32(p + offset);
    const uint32_t seq_len = load_u32(p + offset + 4);
    const uint32_t count = load_u32(p + offset + 8);
    if (seq_len == 0) return make_error(ErrorCode::bad_seq_len, "record for layer " + str(layer) + " has seq_len 0");
    size_t expected_count = 0;
    if (__builtin_mul_overflow(size_t{seq_len}, hidden, &expected_count))
      return make_error(ErrorCode::bad_seq_len, "record for layer " + str(layer) + ": seq_len=" + str(seq_len) +
                                                    " × hidden=" + str(hidden) + " overflows");
    if (count != expected_count)
      return make_error(ErrorCode::bad_length, "record for layer " + str(layer) + " says count=" + str(count) +
                                                   ", expected seq_len=" + str(seq_len) + " × hidden=" +
                                                   str(hidden) + " = " + str(expected_count));
    auto need = values_byte_size(encoding, seq_len, hidden);
    if (!need) return make_error(ErrorCode::bad_seq_len, "record for layer " + str(layer) + " is too large");
    const size_t start = offset + kRecordHeader;
    if (n - start < *need)
      return make_error(ErrorCode::truncated, "batch response ends inside the values of layer " + str(layer) +
                                                  ": " + str(n - start) + " bytes left, expected " +
                                                  describe_expected(encoding, seq_len, hidden));
    view.records.push_back({layer, seq_len, body.subspan(start, *need), body.subspan(offset, kRecordHeader + *need)});
    offset = start + *need;
  }
  if (offset != n)
    return make_error(ErrorCode::bad_length, "batch response has " + str(n - offset) +
                                                 " trailing bytes after its " + str(r) + " records");
  return view;
}

void write_batch_response(std::span<const ResponseRecordView> records, size_t hidden, float latency_ms,
                          std::string& out) {
  size_t total = kResponseHeader;
  for (const auto& r : records) total += kRecordHeader + r.values.size();
  out.resize(total);
  auto* p = reinterpret_cast<uint8_t*>(out.data());
  store_u32(p, kBatchMarker);
  store_u32(p + 4, static_cast<uint32_t>(records.size()));
  store_f32(p + 8, latency_ms);
  p += kResponseHeader;
  for (const auto& r : records) {
    store_u32(p, r.layer);
    store_u32(p + 4, r.seq_len);
    store_u32(p + 8, static_cast<uint32_t>(size_t{r.seq_len} * hidden));
    if (!r.values.empty()) std::memcpy(p + kRecordHeader, r.values.data(), r.values.size());
    p += kRecordHeader + r.values.size();
  }
}

// ---- values --------------------------------------------------------------------------

Status decode_values(Encoding encoding, Bytes values, size_t rows, size_t hidden, std::span<float> out) {
  auto need = values_byte_size(encoding, rows, hidden);
  if (!need || *need != values.size() || out.size() != rows * hidden)
    return make_error(ErrorCode::internal, "decode_values called with mismatched sizes (" + str(values.size()) +
                                               " bytes into " + str(out.size()) + " floats)");
  const WireKernels& k = best_kernels();
  switch (encoding) {
    case Encoding::f32:
      if (!k.decode_f32(values.data(), out.size(), out.data()))
        return make_error(ErrorCode::non_finite_input, "f32 values hold a non-finite value: " +
                                                           first_non_finite(out, hidden));
      return Ok{};
    case Encoding::f16:
      if (!k.decode_f16(values.data(), out.size(), out.data()))
        return make_error(ErrorCode::non_finite_input, "f16 values hold a non-finite value: " +
                                                           first_non_finite(out, hidden));
      return Ok{};
    case Encoding::q8:
      if (!k.decode_q8(values.data(), out.size(), out.data()))
        return make_error(ErrorCode::bad_q8_block, describe_bad_q8_block(values, hidden));
      return Ok{};
    case Encoding::i8: {
      const size_t block = kI8BlockHeaderBytes + hidden;
      for (size_t r = 0; r < rows; ++r) {
        const uint8_t* b = values.data() + r * block;
        const float scale = load_f32(b);
        const float zero_point = load_f32(b + 4);
        if (zero_point != 0.0f)
          return make_error(ErrorCode::bad_i8_block, "i8 block of position " + str(r) + " has zero_point " +
                                                         std::to_string(zero_point) + "; expected 0 (symmetric)");
        if (!i8_scale_is_valid(scale))
          return make_error(ErrorCode::bad_i8_block, "i8 block of position " + str(r) + " has scale " +
                                                         std::to_string(scale) +
                                                         "; expected a finite, non-negative scale with 127×scale finite");
        k.decode_i8_row(b + kI8BlockHeaderBytes, hidden, scale, out.data() + r * hidden);
      }
      return Ok{};
    }
  }
  return make_error(ErrorCode::internal, "unknown encoding");
}

Status check_distinct_layers(const std::vector<uint32_t>& layers) {
  std::vector<uint32_t> sorted(layers);
  std::sort(sorted.begin(), sorted.end());
  if (auto it = std::adjacent_find(sorted.begin(), sorted.end()); it != sorted.end())
    return make_error(ErrorCode::duplicate_layer, "layer " + std::to_string(*it) +
                                                      " is named more than once in the batch; each layer may appear once");
  return Ok{};
}

}  // namespace larql::wire
