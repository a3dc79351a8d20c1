// The second seam (PROTOCOL §13, DESIGN.md "The second mode"): where a range of whole layers
// runs. A local run is the transformer's own layer loop over every layer; a client of
// session shards gives each range to a backend that sends the residual entering the range
// and gets back the residual leaving it, the shard keeping the range's KV cache.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "base/errors.h"

namespace larql {

struct SequenceChunk;

// Whether a sequence may join the next pass (LayerRangeBackend::admit): it is ready where the
// layers run; or there is no room for it there yet (a later pass tries again, not before
// retry_after); or it cannot run, and the error ends that sequence alone.
struct Admission {
  enum class State { ready, wait, failed };
  State state = State::ready;
  std::chrono::milliseconds retry_after{0};  // wait
  std::optional<Error> error = {};           // failed
};

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
  // Before a pass, on the thread that runs them: readies the new sequences of `chunks` where
  // this range runs (a remote range opens or forks their sessions) without waiting for room,
  // and sets the admissions (one per chunk) of those that are not ready; chunks already not
  // ready are left alone. A batch admits its sequences so that one that cannot start yet
  // neither stalls nor fails the others' pass; a pass readies what admission did not, waiting.
  virtual void admit(std::span<const SequenceChunk> chunks, std::span<Admission> admissions) { (void)chunks, (void)admissions; }
};

}  // namespace larql
