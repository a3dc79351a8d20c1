// The second seam (PROTOCOL §13, DESIGN.md "The second mode"): where a range of whole layers
// runs. A local run is the transformer's own layer loop over every layer; a client of
// session shards gives each range to a backend that sends the residual entering the range
// and gets back the residual leaving it, the shard keeping the range's KV cache.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <vector>

#include "base/errors.h"

namespace larql {

struct SequenceChunk;

class LayerRangeBackend {
 public:
  virtual ~LayerRangeBackend() = default;
  virtual size_t first_layer() const = 0;
  virtual size_t last_layer() const = 0;  // inclusive
  // x holds the residual entering first_layer() for every row of the pass, [rows][hidden],
  // chunk after chunk; it is replaced by the residual leaving last_layer(): every row, or
  // when `logit_rows_only`, only each chunk's rows from its first_logit on (the last range
  // of a pass, whose other rows the head does not read). A failure is an error, never zeros.
  virtual Status run(std::span<const SequenceChunk> chunks, std::vector<float>& x, bool logit_rows_only) = 0;
  // A new sequence's state (KvCache::remote) continuing the first `positions` of the
  // sequence whose state is `from` (every range's), made where the layers run at the new
  // sequence's first pass, which starts at `positions`. Null: this backend cannot.
  virtual std::shared_ptr<void> continue_from(const std::shared_ptr<void>& from, size_t positions) {
    (void)from, (void)positions;
    return nullptr;
  }
};

}  // namespace larql
