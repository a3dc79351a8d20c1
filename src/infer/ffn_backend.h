// The one seam of the design: where a layer's FFN runs. LocalFfn computes with in-process
// weights; RemoteFfn (net/) sends x over the wire. The shard server calls the same LocalFfn,
// so a remote f32 run is bit-identical to a local one.
#pragma once

#include <cstdint>
#include <span>

#include "base/errors.h"

namespace larql {

class FfnBackend {
 public:
  virtual ~FfnBackend() = default;
  // out[t] = FFN_layer(x[t]) for t < rows; x and out are [rows][hidden], row-major.
  // A failure is an error, never zeros.
  virtual Status forward(uint32_t layer, std::span<const float> x, size_t rows, std::span<float> out) = 0;
};

}  // namespace larql
