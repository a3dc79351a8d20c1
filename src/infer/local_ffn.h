// The FFN computed in process: down · act(gate · x) ⊙ (up · x), per position; a
// mixture-of-experts layer's router and experts (moe_ffn.h) where the layer is sparse.
#pragma once

#include <vector>

#include "infer/ffn_backend.h"
#include "infer/moe_ffn.h"
#include "kernels/thread_pool.h"
#include "model/model.h"

namespace larql {

class LocalFfn : public FfnBackend {
 public:
  LocalFfn(const Model& model, ThreadPool& pool) : model_(model), pool_(pool), moe_(model, pool) {}
  // Not thread-safe (it owns scratch buffers): one instance per concurrent caller.
  Status forward(uint32_t layer, std::span<const float> x, size_t rows, std::span<float> out) override;
  Status experts(uint32_t layer, std::span<const float> x, size_t rows, std::span<const ExpertAssignment> assignments,
                 std::span<float> out) override;
  Status expert_rows(uint32_t layer, std::span<const float> x, size_t rows, std::span<const ExpertAssignment> assignments,
                     std::span<float> out) override;

 private:
  const Model& model_;
  ThreadPool& pool_;
  std::vector<float> gate_, up_;
  MoeFfn moe_;

  Status check_layer(uint32_t layer, size_t x_size, size_t rows) const;
  Status check_experts(uint32_t layer, size_t x_size, size_t rows, std::span<const ExpertAssignment> assignments,
                       size_t out_rows, size_t out_size) const;
};

}  // namespace larql
