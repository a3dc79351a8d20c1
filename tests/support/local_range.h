// A layer range run by a transformer of its own, with a cache per sequence of the caller's:
// a session shard's arrangement without the wire (LayerRangeBackend).
#pragma once

#include <map>
#include <vector>

#include "infer/layer_range_backend.h"
#include "infer/local_ffn.h"
#include "infer/transformer.h"

namespace larql::test {

class LocalRange : public LayerRangeBackend {
 public:
  LocalRange(const Model& model, ThreadPool& pool, size_t first, size_t last)
      : ffn_(model, pool), layers_(model, ffn_, pool), first_(first), last_(last) {}
  size_t first_layer() const override { return first_; }
  size_t last_layer() const override { return last_; }
  Status run(std::span<const SequenceChunk> chunks, std::vector<float>& x, bool logit_rows_only) override {
    std::vector<SequenceChunk> mine;
    for (const SequenceChunk& ch : chunks)
      mine.push_back({&caches_[ch.cache], ch.tokens, ch.pos, logit_rows_only ? ch.first_logit : 0});
    std::vector<float> out;
    if (auto s = layers_.forward_range(mine, first_, last_, x, out); !s) return s;
    x.swap(out);
    return Ok{};
  }

 private:
  LocalFfn ffn_;
  Transformer layers_;
  size_t first_, last_;
  std::map<const KvCache*, KvCache> caches_;
};

}  // namespace larql::test
