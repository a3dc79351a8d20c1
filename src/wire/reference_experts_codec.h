// The reference implementation's expert layouts (PROTOCOL §12, "Reference compatibility"):
// POST /v1/experts/layer-batch and /v1/experts/layer-batch-f16, one position each, the
// residual before the pre-experts norm, the experts in the caller's order (top-k order,
// zero weights allowed), summed in that order. Served so that a reference client can use
// our expert shards; our own clients speak /v1/walk-experts.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/errors.h"
#include "wire/codec.h"

namespace larql::wire {

struct ReferenceExpert {
  uint32_t expert;
  float weight;
};

struct ReferenceExpertRequest {
  uint32_t layer = 0;
  std::vector<float> residual;  // hidden values
  std::vector<ReferenceExpert> experts;
};

// [layer][hidden][K][residual: hidden × f32 (f16)][K × (expert u32, weight f32)]. Errors:
// truncated, bad_length (a hidden other than `hidden`, or trailing bytes), non_finite_input.
Result<ReferenceExpertRequest> parse_reference_expert_request(Bytes body, bool f16, size_t hidden);

// [hidden][latency_ms f32][hidden × f32 (f16)]; non_finite_output when a value is not
// finite, or for f16 beyond its range (this route has no f32 fallback).
Result<std::string> encode_reference_expert_response(std::span<const float> values, float latency_ms, bool f16);

// The request's bytes, for clients and tests.
std::string encode_reference_expert_request(uint32_t layer, std::span<const float> residual,
                                            std::span<const ReferenceExpert> experts, bool f16);

}  // namespace larql::wire
