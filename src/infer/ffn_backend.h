// The one seam of the design: where a layer's FFN runs. LocalFfn computes with in-process
// weights; RemoteFfn (net/) sends x over the wire. The shard server calls the same LocalFfn,
// so a remote f32 run is bit-identical to a local one.
#pragma once

#include <cstdint>
#include <span>

#include "base/errors.h"
#include "wire/expert_codec.h"

namespace larql {

using wire::ExpertAssignment;

class FfnBackend {
 public:
  virtual ~FfnBackend() = default;
  // out[t] = FFN_layer(x[t]) for t < rows; x and out are [rows][hidden], row-major.
  // A failure is an error, never zeros. On a mixture-of-experts layer whose router reads
  // the FFN input, the backend routes by itself; on Gemma 4's, this is the dense MLP only.
  virtual Status forward(uint32_t layer, std::span<const float> x, size_t rows, std::span<float> out) = 0;
  // A mixture-of-experts layer's routed experts, the router having run on the caller's side
  // (PROTOCOL §12): out[row] = Σ weight · expert(x[row]) over the row's assignments, which
  // are sorted by row, then expert id (wire::sum_expert_rows' order).
  virtual Status experts(uint32_t layer, std::span<const float> x, size_t rows,
                         std::span<const ExpertAssignment> assignments, std::span<float> out) {
    (void)x, (void)rows, (void)assignments, (void)out;
    return make_error(ErrorCode::not_moe_layer, "layer " + std::to_string(layer) + ": this FFN backend has no experts");
  }
  // A layer with experts beside its dense MLP (Gemma 4): forward(layer, x) into out and
  // experts(layer, expert_x, assignments) into expert_out, at once where the backend can.
  virtual Status forward_with_experts(uint32_t layer, std::span<const float> x, std::span<const float> expert_x, size_t rows,
                                      std::span<const ExpertAssignment> assignments, std::span<float> out,
                                      std::span<float> expert_out) {
    if (auto s = forward(layer, x, rows, out); !s) return s;
    return experts(layer, expert_x, rows, assignments, expert_out);
  }
  // The same, answering each assignment's unweighted expert(x[row]): out is [assignments][hidden].
  virtual Status expert_rows(uint32_t layer, std::span<const float> x, size_t rows,
                             std::span<const ExpertAssignment> assignments, std::span<float> out) {
    (void)x, (void)rows, (void)assignments, (void)out;
    return make_error(ErrorCode::not_moe_layer, "layer " + std::to_string(layer) + ": this FFN backend has no experts");
  }
};

}  // namespace larql
