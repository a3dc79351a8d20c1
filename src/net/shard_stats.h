// A shard's /v1/stats (PROTOCOL §8) as the router and the client read it: one parser,
// checked field by field, so that a shard answering something else is refused with a
// message naming the field, never with an exception. Fields a reference server may leave
// out are optional here, and each reader says what it does without them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/errors.h"
#include "net/layer_range.h"

namespace larql {

struct ShardStats {
  size_t hidden = 0;                           // hidden_size: the one required field
  size_t num_layers = 0;
  std::string model, family;
  std::string mode;                            // "ffn-service" or "router"; "" when not said
  std::string ffn_arithmetic = "f32";          // absent: the exact arithmetic
  std::optional<LayerRange> layers;            // the layers it serves
  std::optional<std::map<uint32_t, std::string>> fingerprints;  // layer_fingerprints
  std::optional<std::vector<std::string>> request_encodings;    // wire.request, as named
  std::optional<std::vector<std::string>> response_encodings;   // wire.response, as named
  std::optional<size_t> max_body_bytes, max_work;
  // A shard of a mixture-of-experts model (PROTOCOL §12).
  struct Experts {
    size_t count = 0, shared = 0, used = 0;
    LayerRange owned;  // start-end, inclusive
  };
  std::optional<Experts> experts;
  std::optional<std::map<uint32_t, std::string>> expert_fingerprints;  // per layer, over the owned experts
  std::string routing;  // "shard" or "client" ("" when not said)
  // A session shard's "sessions" object and fingerprints (PROTOCOL §13); absent otherwise.
  struct Sessions {
    size_t open = 0, max = 0, max_positions = 0, max_rows = 0, rewind_positions = 0;
    double idle_timeout_s = 0;
    std::vector<std::string> wire;      // encodings of /v1/walk-layers, as named
    std::string layers_arithmetic;
    std::map<uint32_t, std::string> fingerprints;  // session_fingerprints
    std::string config_fingerprint, globals_fingerprint;
    // A router's: each range behind it, with its configuration fingerprint and arithmetic.
    struct RangeInfo {
      LayerRange layers;
      std::string config_fingerprint, layers_arithmetic;
    };
    std::vector<RangeInfo> ranges;
  };
  std::optional<Sessions> sessions;
};

// The error says which field is not what §8 says it is.
Result<ShardStats> parse_shard_stats(std::string_view body);

}  // namespace larql
