// A mixture-of-experts layer computed in process: the router's logits, each position's
// top-k experts (moe_routing.h) as assignments sorted by row, then expert id, and the
// chosen experts over their rows: Σ weight · expert(x) per row in that order, each product
// rounded to f32 and added to a running sum that starts at the first term (the order
// PROTOCOL §12's bit-identity rests on), or each expert's unweighted rows. The positions
// routed to one expert go through its rows as one product, and only the chosen experts'
// rows are read.
#pragma once

#include <span>
#include <vector>

#include "infer/ffn_backend.h"
#include "infer/moe_routing.h"
#include "kernels/matvec.h"
#include "kernels/thread_pool.h"
#include "model/model.h"

namespace larql {

enum class ExpertOutput {
  weighted_sums,  // [rows][hidden]
  expert_rows,    // [assignments][hidden], unweighted, in assignment order
};

class MoeFfn {
 public:
  MoeFfn(const Model& model, ThreadPool& pool) : model_(model), pool_(pool) {}
  // Not thread-safe (scratch buffers): one instance per concurrent caller.
  // Routes x's rows and sums their experts (the shared ones included): the whole layer, where the router reads x.
  Status forward(uint32_t layer, std::span<const float> x, size_t rows, std::span<float> out);
  // The router's choices for `router_input`'s rows (× the layer's expert_scale, where it has
  // one), then each row's shared experts, weighted by their gates' sigmoid.
  Status route(uint32_t layer, const float* router_input, size_t rows, std::vector<ExpertAssignment>& out);
  // The assigned experts over x's rows. The assignments are valid (wire::check_assignments).
  void run_experts(uint32_t layer, const float* x, size_t rows, std::span<const ExpertAssignment> assignments, float* out,
                   ExpertOutput kind = ExpertOutput::weighted_sums);

 private:
  // Row i of gate_/up_ (`inner`: at row_inner_[i]) or of the experts' outputs (width H) += its expert's bias, where it has one.
  void add_expert_biases(const LayerWeights& w, Matrix ExpertWeights::*bias, float* rows, bool inner);

  const Model& model_;
  ThreadPool& pool_;
  std::vector<float> logits_, inputs_, gate_, up_, outputs_;
  std::vector<ExpertChoice> choices_;
  std::vector<ExpertAssignment> assignments_;
  std::vector<std::vector<uint32_t>> members_;  // per expert: the assignments routed to it
  std::vector<size_t> offsets_;                 // per expert: its first row in inputs_, gate_, up_, outputs_
  std::vector<uint32_t> row_expert_;            // per row of those: its expert
  std::vector<size_t> row_inner_;               // per row of those: its first value in gate_ and up_ (and one past the last row's)
  std::vector<size_t> output_row_;              // per assignment: its row in outputs_
  std::vector<size_t> row_first_;               // per row: its first assignment (and one past the last row's)
  std::vector<InputProduct> products_;
};

}  // namespace larql
