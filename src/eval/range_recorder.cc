#include "eval/range_recorder.h"

#include <cmath>

#include "base/f16.h"

namespace larql {

Status RangeRecorder::forward(uint32_t layer, std::span<const float> x, size_t rows, std::span<float> out) {
  auto s = inner_.forward(layer, x, rows, out);
  if (s) record(layer, x, out);
  return s;
}

Status RangeRecorder::experts(uint32_t layer, std::span<const float> x, size_t rows,
                              std::span<const ExpertAssignment> assignments, std::span<float> out) {
  auto s = inner_.experts(layer, x, rows, assignments, out);
  if (s) record(layer, x, out);
  return s;
}

void RangeRecorder::record(uint32_t layer, std::span<const float> x, std::span<const float> out) {
  if (layer >= layers_.size()) return;
  LayerValueRange& r = layers_[layer];
  for (float v : x) {
    r.max_abs_input = std::max(r.max_abs_input, std::fabs(v));
    r.beyond_f16 += std::fabs(v) > kF16Max;
  }
  for (float v : out) {
    r.max_abs_output = std::max(r.max_abs_output, std::fabs(v));
    r.beyond_f16 += std::fabs(v) > kF16Max;
  }
}

}  // namespace larql
