// A mixture-of-experts router's choice for one position: from its logits over the experts
// to the top-k experts, in ascending expert id, with their weights (model.h's RouterWeights;
// ../shared/reference/moe-architecture.md). Ties go to the lower expert id.
#pragma once

#include <cstdint>
#include <span>

#include "base/errors.h"
#include "model/model.h"

namespace larql {

struct ExpertChoice {
  uint32_t expert;
  float weight;
};

// `out` gets moe.experts_used choices. Non-finite logits are an error (non_finite_output),
// never a silent choice.
Status route(std::span<const float> logits, const MoeSpec& moe, std::span<ExpertChoice> out);

}  // namespace larql
