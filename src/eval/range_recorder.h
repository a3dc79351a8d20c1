// An FfnBackend that passes calls through and records, per layer, the largest |value| of
// the FFN inputs and outputs and how many lie beyond the f16 range (|x| > 65504): the
// ADR's open question about early layers, answered per model.
#pragma once

#include <vector>

#include "infer/ffn_backend.h"

namespace larql {

struct LayerValueRange {
  float max_abs_input = 0, max_abs_output = 0;
  size_t beyond_f16 = 0;  // inputs and outputs together
};

class RangeRecorder : public FfnBackend {
 public:
  RangeRecorder(FfnBackend& inner, size_t layers) : inner_(inner), layers_(layers) {}
  Status forward(uint32_t layer, std::span<const float> x, size_t rows, std::span<float> out) override;
  Status experts(uint32_t layer, std::span<const float> x, size_t rows, std::span<const ExpertAssignment> assignments,
                 std::span<float> out) override;
  const std::vector<LayerValueRange>& layers() const { return layers_; }

 private:
  void record(uint32_t layer, std::span<const float> x, std::span<const float> out);
  FfnBackend& inner_;
  std::vector<LayerValueRange> layers_;
};

}  // namespace larql
