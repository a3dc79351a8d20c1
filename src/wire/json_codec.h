// The JSON variant of /v1/walk-ffn (PROTOCOL §5 "JSON"). Not a hot path: it exists for
// curl users and old clients, so it favours clear errors over speed.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/errors.h"
#include "wire/codec.h"

namespace larql::wire {

struct JsonRequest {
  std::vector<uint32_t> layers;
  uint32_t seq_len = 1;
  std::vector<float> residual;  // seq_len × hidden
};

// {"layer": L} or {"layers": [..]} ("layers" wins), "residual", "seq_len" (default 1),
// "full_output": true (required).
Result<JsonRequest> parse_json_request(std::string_view body, size_t hidden);
std::string encode_json_request(std::span<const uint32_t> layers, uint32_t seq_len, std::span<const float> residual);

struct JsonRecord {
  uint32_t layer;
  uint32_t seq_len;
  std::vector<float> output;
};

struct JsonResponse {
  float latency_ms = 0;
  std::vector<JsonRecord> records;
};

// One record → {"layer","output","seq_len","latency_ms"}; otherwise
// {"results":[{"layer","output","seq_len"},..],"seq_len","latency_ms"}.
Result<std::string> encode_json_response(std::span<const ResponseRecord> records, uint32_t seq_len,
                                         float latency_ms);
Result<JsonResponse> parse_json_response(std::string_view body, size_t hidden);

}  // namespace larql::wire
