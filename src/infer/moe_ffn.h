// A mixture-of-experts layer computed in process: the router's logits, each position's
// top-k experts (moe_routing.h), and Σ weight · expert(x) over them in ascending expert id,
// each product rounded to f32 and added to a running sum that starts at the first term
// (the order PROTOCOL §12's bit-identity rests on). The positions routed to one expert go
// through its rows as one product, and only the chosen experts' rows are read.
#pragma once

#include <span>
#include <vector>

#include "infer/moe_routing.h"
#include "kernels/matvec.h"
#include "kernels/thread_pool.h"
#include "model/model.h"

namespace larql {

class MoeFfn {
 public:
  MoeFfn(const Model& model, ThreadPool& pool) : model_(model), pool_(pool) {}
  // Not thread-safe (scratch buffers): one instance per concurrent caller.
  Status forward(uint32_t layer, std::span<const float> x, size_t rows, std::span<float> out);
  // The two halves, for Gemma 4, whose router and experts read different inputs: the
  // router's choices for `router_input`'s rows (× the layer's expert_scale, where it has
  // one), then the chosen experts over `x` weighted by them.
  Status route(uint32_t layer, const float* router_input, size_t rows);
  void run_experts(uint32_t layer, const float* x, size_t rows, float* out);
  // The last forward's choices: experts_used per position, in ascending expert id.
  std::span<const ExpertChoice> choices() const { return choices_; }

 private:
  const Model& model_;
  ThreadPool& pool_;
  std::vector<float> logits_, inputs_, gate_, up_, outputs_;
  std::vector<ExpertChoice> choices_;
  std::vector<std::vector<uint32_t>> members_;  // per expert: the (position · k + slot) routed to it
  std::vector<size_t> offsets_;                 // per expert: its first row in inputs_, gate_, up_, outputs_
  std::vector<size_t> output_row_;              // per (position · k + slot): its row in outputs_
  std::vector<InputProduct> products_;
};

}  // namespace larql
