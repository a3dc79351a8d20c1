// PROTOCOL §9's split and splice, apart from sockets and replicas: a /v1/walk-ffn request
// whose layers several ranges own is cut into one request per range, and the ranges'
// answers are put back together in request order. The router sends the parts; tests drive
// these functions with bodies made in memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/errors.h"
#include "net/layer_range.h"
#include "wire/codec.h"
#include "wire/json_codec.h"

namespace larql {

// A request as the router reads it. A binary request's values are a view into the body it
// was read from, which must outlive it.
struct WalkRequest {
  std::optional<wire::Encoding> encoding;  // none: JSON
  std::optional<wire::RequestView> binary;
  std::optional<wire::JsonRequest> json;

  // Distinct, in request order.
  const std::vector<uint32_t>& layers() const { return binary ? binary->header.layers : json->layers; }
  uint32_t positions() const { return binary ? binary->header.seq_len : json->seq_len; }
};

// Reads and checks a request for a model of `hidden` values per position: 415 for a
// Content-Type that is neither a binary encoding nor JSON, the codecs' errors, and
// duplicate_layer.
Result<WalkRequest> read_walk_request(std::string_view body, std::string_view content_type, size_t hidden);

// The range that owns a layer: its index in the caller's list, and its extent.
struct LayerOwner {
  size_t index;
  LayerRange extent;
};

// One range's share of a request.
struct RangePart {
  LayerOwner owner;
  std::vector<uint32_t> layers;   // the request's layers it owns, in request order
  std::vector<size_t> positions;  // where they stand in the request
};

// Groups the layers by the range that owns them, ranges in the order their first layer
// appears. `owner(layer)` is none for a layer no range owns: then the error is
// no_owning_shard, naming the layer and `covered` (the ranges there are).
Result<std::vector<RangePart>> split_by_range(const std::vector<uint32_t>& layers,
                                              const std::function<std::optional<LayerOwner>(uint32_t)>& owner,
                                              std::string_view covered);

// The request for one part: the same encoding and positions, only the part's layers (a
// binary request's values are copied untouched, never re-encoded).
std::string part_body(const WalkRequest& request, const RangePart& part);

// A part's 200 answer, from the shard at `shard`.
struct PartAnswer {
  std::string shard;
  std::string content_type;
  std::string body;
};

// The answers, one per part in the parts' order, as one answer to the request. Binary
// answers in one encoding are spliced byte for byte (q8 and i8 are never re-quantised);
// mixed encodings (a shard fell back to f32) are decoded and the whole answer re-encoded
// as f32. An answer that is malformed, in another encoding than the request's kind, or for
// other layers is shard_unavailable, naming the shard and its range.
struct SplicedAnswer {
  std::string content_type;
  std::string body;
  bool reencoded_f32 = false;
};
Result<SplicedAnswer> splice_answers(const WalkRequest& request, const std::vector<RangePart>& parts,
                                     const std::vector<PartAnswer>& answers, size_t hidden);

}  // namespace larql
