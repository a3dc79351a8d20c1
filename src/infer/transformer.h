// The forward pass: embeddings, attention, norms and the KV cache run here; each layer's
// FFN goes through an FfnBackend.
#pragma once

#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "infer/ffn_backend.h"
#include "infer/kv_cache.h"
#include "infer/layer_range_backend.h"
#include "infer/moe_ffn.h"
#include "kernels/thread_pool.h"
#include "model/model.h"

namespace larql {

// One sequence's share of a batched pass: `tokens` at positions [pos, pos + n) of its
// cache; logits wanted for its rows from `first_logit` (< n) on.
struct SequenceChunk {
  KvCache* cache;
  std::span<const int> tokens;
  size_t pos;
  size_t first_logit;
  // A tree of drafts instead of a chain (empty: row t follows row t - 1). parents[0] is -1
  // (row 0 follows the cache) and row t ≥ 1 follows row parents[t] < t: it sits at the
  // position after its parent's (pos + its depth) and attends to the cache before pos and
  // to its ancestors (itself included), so its logits are those of its path fed alone. Its
  // keys and values take the cache's slot of position pos + t; Transformer::keep_path moves
  // a kept path's to their positions.
  std::span<const int> parents = {};
};

// Token `token`'s row of the embedding, × the model's embedding scale: the residual entering
// layer 0 (PROTOCOL §13), [hidden] floats at out.
void embed_token(const Model& model, int token, float* out);

class Transformer {
 public:
  Transformer(const Model& model, FfnBackend& ffn, ThreadPool& pool);

  // Runs `tokens` at positions [pos, pos + tokens.size()) in one pass per layer (a prefill
  // when there are several) and writes the logits of the last position.
  Status forward(std::span<const int> tokens, size_t pos, std::vector<float>& logits);
  // The same, writing the logits of every position from `first` (< tokens.size()) on:
  // [tokens.size() - first][vocab]. Each row equals what `forward` gives for that position.
  Status forward_logits(std::span<const int> tokens, size_t pos, size_t first, std::vector<float>& logits);
  // forward_logits over a tree of drafts (SequenceChunk::parents), every row's logits.
  Status forward_tree(std::span<const int> tokens, std::span<const int> parents, size_t pos, std::vector<float>& logits);
  // keep_path on forward's and forward_logits' sequence.
  void keep_path(std::span<const size_t> path, size_t pos) { larql::keep_path(model_.config, cache_, path, pos); }
  // forward's sequence's keys and values.
  const KvCache& cache() const { return cache_; }
  // forward's sequence continues this cache's positions (a prompt cache loaded from a file).
  void set_cache(KvCache cache) { cache_ = std::move(cache); }

  // Several sequences in one pass: every matmul and each layer's one FFN call take all
  // their rows together; attention stays within each sequence's cache. Logits of each
  // chunk's rows from its first_logit, chunk after chunk: [rows][vocab]. Each row equals
  // what a pass over its sequence alone gives (the kernels are row-wise exact).
  Status forward_batch(std::span<const SequenceChunk> chunks, std::vector<float>& logits);

  // Layers first…last only, for a session shard's range (PROTOCOL §13): `x` is the residual
  // entering layer `first` of every row, [rows][hidden] chunk after chunk; `out` gets the
  // residual leaving layer `last` of each chunk's rows from its first_logit on (first_logit
  // may equal the chunk's rows: none). The rows' tokens give per-layer inputs (Gemma 4 E);
  // `before_layer` is called before each layer (a deadline, a caller gone, a turn to take)
  // and stops the pass with its error.
  using LayerHook = std::function<Status(size_t layer)>;
  Status forward_range(std::span<const SequenceChunk> chunks, size_t first, size_t last, std::span<const float> x,
                       std::vector<float>& out, const LayerHook& before_layer = {});

  // Whole layers elsewhere: the passes run these ranges in order (they must cover every
  // layer, each starting where the previous one ended) in place of the local layer loop.
  // Empty: every layer here. The backends outlive the transformer's passes.
  Status set_layer_ranges(std::vector<LayerRangeBackend*> ranges);

  // A new sequence's cache that continues `from`'s first `positions` (a prompt prefix cache's
  // hit): a copy of those positions' keys and values here, or, where the layers run
  // elsewhere, a state that makes them there at the sequence's first pass (at `positions`).
  // Nullopt when the ranges cannot.
  std::optional<KvCache> continue_from(const KvCache& from, size_t positions) const;

  // Where the layers run elsewhere: readies the chunks' new sequences there before a pass,
  // one admission per chunk (LayerRangeBackend::admit); every one ready when they run here.
  std::vector<Admission> admit(std::span<const SequenceChunk> chunks);

  const ModelConfig& config() const { return model_.config; }

 private:
  // The pass's rows from its chunks (row_chunk_, row_pos_, … and logit_rows_), checked;
  // `output_optional`: a chunk's first_logit may equal its rows (forward_range).
  Status prepare_rows(std::span<const SequenceChunk> chunks, bool output_optional);
  // Each row's scaled embedding into out ([rows][hidden]).
  void embed_rows(std::vector<float>& out);
  // Layers first…last over x_, calling before_layer (when set) before each.
  Status run_layers(std::span<const SequenceChunk> chunks, size_t first, size_t last, const LayerHook& before_layer);
  // The final norm and the classifier over `rows` rows of x_ (at logit_rows_ when
  // `at_logit_rows`, else the first rows), into logits.
  void head(bool at_logit_rows, std::vector<float>& logits);
  // Writes the pass's keys and values (k_, v_) into layer l's cache of each row's sequence.
  void store_kv(size_t layer, std::span<const SequenceChunk> chunks);
  void attention(size_t layer, std::span<const SequenceChunk> chunks);
  // Rotates each of v's heads (2 · half values) by the angles whose cosines and sines are given.
  void rope(float* v, size_t heads, const float* cosines, const float* sines, size_t half) const;
  void norm_rows(float* out, const float* x, size_t rows, const Matrix& weight, size_t n) const;
  void add_rows(float* x, const float* y, size_t rows, size_t n) const;  // x += y, rows of n
  // Gemma 4's FFN: the dense MLP on xb_ and the experts beside it, routed on x_, into proj_:
  // dense_out_norm(mlp(xb_)) + expert_out_norm(Σ weight · expert(expert_norm(x_))).
  Status dense_and_experts(size_t layer, size_t rows);
  // Gemma 4's per-layer embeddings: layer l's input (ple_in_, rows × ple_dim) from the
  // scaled embeddings (embedded_) and the rows' tokens; then its gated projection added to x_.
  void per_layer_input(size_t layer, size_t rows);
  void add_per_layer_embedding(size_t layer, size_t rows);

  const Model& model_;
  FfnBackend& ffn_;
  ThreadPool& pool_;
  std::vector<std::vector<float>> inv_freq_;  // [layer][rotated pair of a head]
  std::vector<float> rope_magnitude_;          // [layer]: cos and sin × this (YaRN's attention factor; else 1)
  std::vector<size_t> kv_windows_;             // [layer]: the window its cache keeps (kv_windows)
  KvCache cache_;  // forward's and forward_logits' sequence
  std::vector<size_t> row_chunk_, row_pos_, row_slot_;  // per row of a pass: its chunk, position and cache slot
  // Per row of a pass: [begin, end) of its path's slots in path_slots_ (its ancestors', then
  // its own, in order of position), where those are not the slots before its own (a tree's
  // rows off its first branch); else empty.
  std::vector<std::pair<size_t, size_t>> row_path_;
  std::vector<size_t> path_slots_;
  std::vector<int> row_token_;               // and its token
  std::vector<size_t> logit_rows_;           // the rows whose logits (or outputs) are wanted, in output order
  std::vector<LayerRangeBackend*> ranges_;   // set_layer_ranges'; empty: every layer here
  // Scratch, sized for the largest chunk seen.
  std::vector<float> x_, xb_, q_, k_, v_, att_out_, proj_, router_in_, expert_in_, expert_out_;
  // Per-layer embeddings: the pass's scaled embeddings; a layer's input and its gate.
  std::vector<float> embedded_, ple_in_, ple_gate_;
  // Mixture-of-experts layers are routed here, by the client (PROTOCOL §12), and their
  // experts run through the FfnBackend.
  MoeFfn router_;
  std::vector<ExpertAssignment> assignments_;
};

}  // namespace larql
