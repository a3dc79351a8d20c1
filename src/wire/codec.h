// Binary messages of POST /v1/walk-ffn (PROTOCOL §3–§5): encoders write into a
// caller-owned buffer (capacity reused between calls), parsers validate every length
// against the body with overflow-safe arithmetic and return views into it, and
// decode_values turns a validated value array into floats in a caller-provided span.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/errors.h"
#include "wire/encoding.h"

namespace larql::wire {

inline constexpr uint32_t kBatchMarker = 0xFFFFFFFFu;
inline constexpr uint32_t kFlagFullOutput = 1u;
inline constexpr uint32_t kReferenceTopK = 8092u;  // what the reference client sends
// A batch naming more layers than any model has is malformed (bad_layer_count), not a
// truncation; this bound keeps that distinction independent of the body length.
inline constexpr uint32_t kMaxBatchLayers = 4096;

using Bytes = std::span<const uint8_t>;

inline Bytes as_bytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

// What an encoder did: the encoding actually written (f32 when f16/q8/i8 could not carry
// the values, PROTOCOL §5, §11) and whether that was a fallback.
struct EncodeOutcome {
  Encoding encoding;
  bool fell_back = false;
};

// ---- requests ------------------------------------------------------------------------

struct RequestHeader {
  bool batch = false;
  std::vector<uint32_t> layers;  // one entry for a single request
  uint32_t seq_len = 0;
  uint32_t flags = kFlagFullOutput;
  uint32_t top_k = kReferenceTopK;
};

struct RequestView {
  RequestHeader header;
  Bytes values;  // exactly seq_len × hidden values in the request encoding
};

// One layer → the single layout; two or more → the batch layout. `values` holds
// seq_len × hidden floats. Errors: bad_layer_count (no layers or too many), bad_length
// (values size), non_finite_input (NaN/inf among the values: never sent).
Result<EncodeOutcome> encode_request(Encoding encoding, const RequestHeader& header, size_t hidden,
                                     std::span<const float> values, std::string& out);

// A batch names each layer at most once (duplicate_layer otherwise, naming the layer):
// a duplicate asks for the same work twice and would let one small body demand K layers.
Status check_distinct_layers(const std::vector<uint32_t>& layers);

// Writes a request around value bytes that are already encoded (a router splitting a
// batch reuses the caller's values untouched): one layer → single layout, more → batch.
void write_request_with_values(const RequestHeader& header, Bytes values, std::string& out);

// Validates framing and lengths for a model of `hidden` values per position.
// Values are not inspected here (decode_values does that). A q8 body for a hidden size
// that is not a multiple of 32 is unsupported_media_type.
Result<RequestView> parse_request(Bytes body, Encoding encoding, size_t hidden);

// ---- responses -----------------------------------------------------------------------

struct ResponseRecord {
  uint32_t layer;
  std::span<const float> values;  // seq_len × hidden
};

// One record → the single layout; zero or two-plus → the batch layout. All records share
// seq_len. Falls back to f32 for the whole message if any value does not fit the
// encoding. Errors: bad_length, non_finite_output (NaN/inf: never sent).
Result<EncodeOutcome> encode_response(Encoding encoding, std::span<const ResponseRecord> records,
                                      uint32_t seq_len, size_t hidden, float latency_ms, std::string& out);

struct ResponseRecordView {
  uint32_t layer;
  uint32_t seq_len;
  Bytes values;        // seq_len × hidden values in the response encoding
  Bytes record_bytes;  // the whole record as sent (header included), for splicing
};

struct ResponseView {
  bool batch = false;
  float latency_ms = 0;
  std::vector<ResponseRecordView> records;
};

Result<ResponseView> parse_response(Bytes body, Encoding encoding, size_t hidden);

// Writes a batch response around records that are already encoded, all in one encoding
// (a router splicing its shards' answers reuses their value bytes untouched).
void write_batch_response(std::span<const ResponseRecordView> records, size_t hidden, float latency_ms,
                          std::string& out);

// ---- values --------------------------------------------------------------------------

// Checks a value array of `have` bytes against what rows × hidden require (`what` names it
// in the error): bad_seq_len, unsupported_media_type, truncated, bad_length.
Status check_value_bytes(Encoding encoding, size_t have, size_t rows, size_t hidden, const char* what);

// Writes rows × hidden values at dst; false when the encoding cannot carry them (kernels.h).
bool write_values(Encoding encoding, const float* in, size_t rows, size_t hidden, uint8_t* dst);

// "position P, index I is NaN" for the first non-finite value, for error messages.
std::string first_non_finite(std::span<const float> values, size_t hidden);

// Decodes `rows` × `hidden` values (as validated by a parser) into `out` (same size).
// Errors: non_finite_input for NaN/inf, bad_i8_block / bad_q8_block for a bad scale (or
// an i8 zero_point other than 0).
Status decode_values(Encoding encoding, Bytes values, size_t rows, size_t hidden, std::span<float> out);

}  // namespace larql::wire
