#include "infer/transformer.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/attention.h"
#include "kernels/matvec.h"
#include "kernels/ops.h"
#include "kernels/portable_math.h"

namespace larql {
namespace {

// Llama 3.x frequency scaling (rope_type "llama3").
float scale_llama3(float inv_freq, const Llama3RopeScaling& s) {
  constexpr float kTwoPi = 6.283185307179586f;
  const float wavelen = kTwoPi / inv_freq;
  const float low_freq_wavelen = s.original_max_position / s.low_freq_factor;
  const float high_freq_wavelen = s.original_max_position / s.high_freq_factor;
  if (wavelen < high_freq_wavelen) return inv_freq;
  if (wavelen > low_freq_wavelen) return inv_freq / s.factor;
  const float smooth = (s.original_max_position / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
  return (1 - smooth) * inv_freq / s.factor + smooth * inv_freq;
}

// YaRN's frequency for pair i of a head of `dim` (transformers' _compute_yarn_parameters):
// the original frequency for the fast pairs, the interpolated one (÷ factor) for the slow,
// a linear ramp over the pair index between them, whose ends come from beta_fast and
// beta_slow rotations over the original context.
float yarn_inv_freq(size_t i, size_t dim, float theta, const YarnRopeScaling& y) {
  auto correction_dim = [&](double rotations) {
    return double(dim) * portable_log(double(y.original_max_position) / (rotations * 2 * M_PI)) / (2 * portable_log(double(theta)));
  };
  double low = correction_dim(y.beta_fast), high = correction_dim(y.beta_slow);
  if (y.truncate) low = std::floor(low), high = std::ceil(high);
  low = std::max(low, 0.0), high = std::min(high, double(dim - 1));
  if (low == high) high += 0.001;  // as the reference: no division by zero
  const float ramp = std::clamp((float(i) - float(low)) / (float(high) - float(low)), 0.0f, 1.0f);
  const float extrapolation_share = 1 - ramp;
  const float base = float(portable_pow(theta, float(2 * i) / float(dim)));
  const float extrapolated = 1.0f / base, interpolated = 1.0f / (y.factor * base);
  return interpolated * (1 - extrapolation_share) + extrapolated * extrapolation_share;
}

}  // namespace

Transformer::Transformer(const Model& model, FfnBackend& ffn, ThreadPool& pool)
    : model_(model), ffn_(ffn), pool_(pool), kv_windows_(kv_windows(model.config)), router_(model, pool) {
  const ModelConfig& c = model.config;
  // As run.c computes it: 1 / theta^(2i / head_dim), in float. Proportional RoPE keeps the
  // full head size in the exponent and leaves the pairs past rotated_pairs unturned.
  for (const LayerConfig& layer : c.layer_configs) {
    std::vector<float>& inv_freq = inv_freq_.emplace_back();
    float magnitude = 1;
    if (const auto& yarn = layer.rope.yarn)
      magnitude = yarn->attention_factor > 0 ? yarn->attention_factor : yarn->factor > 1 ? float(0.1 * portable_log(double(yarn->factor)) + 1) : 1.0f;
    rope_magnitude_.push_back(magnitude);
    for (size_t i = 0; i < layer.head_dim / 2; ++i) {
      float f = layer.rope.yarn ? yarn_inv_freq(i, layer.head_dim, layer.rope.theta, *layer.rope.yarn)
                                : 1.0f / float(portable_pow(layer.rope.theta, float(2 * i) / float(layer.head_dim)));
      if (layer.rope.llama3) f = scale_llama3(f, *layer.rope.llama3);
      f /= layer.rope.linear_factor;
      if (layer.rope.rotated_pairs && i >= layer.rope.rotated_pairs) f = 0;
      // GGUF's form of Llama 3's scaling and of Gemma 4's proportional RoPE
      if (model.rope_freqs.data && layer.rope.freq_factors && i < model.rope_freqs.cols)
        f /= load_as_f32(model.rope_freqs.dtype, model.rope_freqs.data, i);
      inv_freq.push_back(f);
    }
  }
}

void Transformer::norm_rows(float* out, const float* x, size_t rows, const Matrix& weight, size_t n) const {
  const ModelConfig& c = model_.config;
  pool_.parallel_rows(rows, n, [&](size_t begin, size_t end) {
    rmsnorm_rows(out + begin * n, x + begin * n, end - begin, weight, n, c.norm_eps, c.norm_weight_offset);
  });
}

void Transformer::add_rows(float* x, const float* y, size_t rows, size_t n) const {
  pool_.parallel_rows(rows, n, [&](size_t begin, size_t end) {
    for (size_t i = begin * n; i < end * n; ++i) x[i] += y[i];
  });
}

void Transformer::rope(float* v, size_t heads, const float* cosines, const float* sines, size_t half) const {
  const size_t hd = 2 * half;
  const bool adjacent = model_.config.rope_layout == RopeLayout::adjacent_pairs;
  for (size_t h = 0; h < heads; ++h) {
    float* head = v + h * hd;
    // adjacent pairs (llama2.c) or the two halves of the head (Hugging Face)
    if (adjacent) {
      for (size_t i = 0; i < half; ++i) {
        const float v0 = head[2 * i], v1 = head[2 * i + 1];
        head[2 * i] = v0 * cosines[i] - v1 * sines[i];
        head[2 * i + 1] = v0 * sines[i] + v1 * cosines[i];
      }
    } else {
      for (size_t i = 0; i < half; ++i) {
        const float v0 = head[i], v1 = head[i + half];
        head[i] = v0 * cosines[i] - v1 * sines[i];
        head[i + half] = v0 * sines[i] + v1 * cosines[i];
      }
    }
  }
}

void Transformer::attention(size_t layer, std::span<const SequenceChunk> chunks) {
  const ModelConfig& c = model_.config;
  const LayerConfig& lc = c.layer(layer);
  const LayerWeights& w = model_.layers[layer];
  const size_t hd = lc.head_dim, q_dim = c.q_dim(layer), group = c.heads / lc.kv_heads;
  const size_t kv_layer = c.kv_layer(layer);  // a KV-shared layer reads an earlier layer's cache
  const size_t rows = row_chunk_.size();
  size_t span = 0;  // the longest history any of these rows sees
  for (const SequenceChunk& ch : chunks) span = std::max(span, ch.pos + ch.tokens.size());
  const float scale = c.attention_scale > 0 ? c.attention_scale : 1.0f / std::sqrt(float(hd));
  // The query heads that share a key-value head take its keys and values together, each
  // read once for all of them; unless that leaves too few jobs for the threads (a decode
  // step of a model with one or two key-value heads), then one head per job.
  const size_t shared = rows * lc.kv_heads >= 2 * pool_.size() ? group : 1;
  // Jobs go head by head, so that a thread's next job finds the same keys and values in
  // its caches. Causal rows cost in proportion to their position: within a head, rows are
  // taken from both ends in turn, so that the pool's contiguous chunks carry equal work
  // even when one cuts a head (taking both ends of the whole job list instead had each
  // thread switch between two heads at every job).
  const size_t jobs = rows * c.heads / shared;
  pool_.parallel_for(jobs, [&](size_t begin, size_t end) {
    // A job's scores live only until its weighted sum: [shared][span] per thread, not a
    // whole rows × heads × span matrix (2 GiB for a 4096-token prompt of 32 heads).
    thread_local std::vector<float> scores;
    scores.resize(shared * span);
    for (size_t k = begin; k < end; ++k) {
      const size_t i = k % rows, t = i % 2 == 0 ? i / 2 : rows - 1 - i / 2;
      const size_t h0 = k / rows * shared, kvh = h0 / group;
      const SequenceChunk& chunk = chunks[row_chunk_[t]];
      const KvCache::Layer& cached = chunk.cache->layers[kv_layer];
      const float* keys = cached.keys[kvh].data();
      const float* values = cached.values[kvh].data();
      const StridedRows queries{q_.data() + t * q_dim + h0 * hd, shared, hd};
      float* att = scores.data();
      // Causal: positions up to the row's own; a sliding layer sees only the last `window`.
      const size_t end_pos = row_pos_[t] + 1;
      const size_t first = lc.attention == AttentionKind::sliding && end_pos > lc.window ? end_pos - lc.window : 0;
      const size_t seen = end_pos - first;
      // A tree row off its first branch: the cache before its chunk, then its path's slots
      // (their scores and values in order of position: the bits of its path fed alone).
      const auto [path_begin, path_end] = row_path_[t];
      const bool tree_row = path_begin != path_end;
      const size_t cached_end = tree_row ? std::max(first, chunk.pos) : end_pos;
      // (Positions from here on are the cache's slots: the position less the first it holds.)
      const size_t base = cached.first;
      key_scores(queries, keys, hd, first - base, cached_end - base, scale, att, span);
      for (size_t j = path_begin; j < path_end; ++j)
        if (const size_t p = chunk.pos + (j - path_begin); p >= first)
          key_scores(queries, keys, hd, path_slots_[j] - base, path_slots_[j] - base + 1, scale, att + (p - first), span);
      if (c.attention_softcap > 0)
        for (size_t h = 0; h < shared; ++h) softcap(att + h * span, seen, c.attention_softcap);
      // GPT-OSS: each head's sink logit, one more column of its softmax.
      thread_local std::vector<float> sinks;
      const float* head_sinks = nullptr;
      if (w.sinks.data) {
        sinks.resize(shared);
        for (size_t h = 0; h < shared; ++h) sinks[h] = load_as_f32(w.sinks.dtype, w.sinks.data, h0 + h);
        head_sinks = sinks.data();
      }
      softmax_rows(att, shared, span, seen, head_sinks);
      float* out = att_out_.data() + t * q_dim + h0 * hd;
      weighted_sum({att, shared, span}, {values + (first - base) * hd, cached_end - first, hd}, hd, out);
      for (size_t j = path_begin; j < path_end; ++j)
        if (const size_t p = chunk.pos + (j - path_begin); p >= first)
          weighted_sum({att + (p - first), shared, span}, {values + (path_slots_[j] - base) * hd, 1, hd}, hd, out, true);
    }
  });
}

void Transformer::store_kv(size_t l, std::span<const SequenceChunk> chunks) {
  const LayerConfig& lc = model_.config.layer(l);
  const size_t hd = lc.head_dim, KV = model_.config.kv_dim(l), n = row_chunk_.size();
  // Each sequence's cache grows with the positions it uses, once per pass (kv_cache.h).
  for (const SequenceChunk& ch : chunks) reserve_kv(model_.config, *ch.cache, l, kv_windows_[l], ch.pos, ch.pos + ch.tokens.size());
  pool_.parallel_rows(n, 2 * KV, [&](size_t begin, size_t end) {
    for (size_t t = begin; t < end; ++t) {
      KvCache::Layer& layer = chunks[row_chunk_[t]].cache->layers[l];
      const size_t slot = row_slot_[t] - layer.first;
      for (size_t h = 0; h < lc.kv_heads; ++h) {
        float* keys = layer.keys[h].data();
        for (size_t d = 0; d < hd; ++d) keys[key_offset(slot, d, hd)] = k_[t * KV + h * hd + d];
        std::memcpy(layer.values[h].data() + slot * hd, &v_[t * KV + h * hd], hd * sizeof(float));
      }
    }
  });
}

Status Transformer::dense_and_experts(size_t l, size_t n) {
  const ModelConfig& c = model_.config;
  const LayerWeights& w = model_.layers[l];
  const size_t D = c.hidden;
  router_in_.resize(n * D), expert_in_.resize(n * D), expert_out_.resize(n * D);
  // The router's input: the residual normed without weight, × router_scale, × D^-½ (in that order).
  norm_rows(router_in_.data(), x_.data(), n, Matrix{}, D);
  const float root = float(portable_pow(double(D), -0.5));
  pool_.parallel_rows(n, D, [&](size_t begin, size_t end) {
    for (size_t t = begin; t < end; ++t)
      for (size_t i = 0; i < D; ++i)
        router_in_[t * D + i] = router_in_[t * D + i] * load_as_f32(w.router_scale.dtype, w.router_scale.data, i) * root;
  });
  if (auto s = router_.route(uint32_t(l), router_in_.data(), n, assignments_); !s) return s;
  norm_rows(expert_in_.data(), x_.data(), n, w.expert_norm, D);
  if (auto s = ffn_.forward_with_experts(uint32_t(l), xb_, expert_in_, n, assignments_, proj_, expert_out_); !s) return s;
  norm_rows(expert_out_.data(), expert_out_.data(), n, w.expert_out_norm, D);
  norm_rows(proj_.data(), proj_.data(), n, w.dense_out_norm, D);
  add_rows(proj_.data(), expert_out_.data(), n, D);
  return Ok{};
}

void Transformer::per_layer_input(size_t l, size_t n) {
  const ModelConfig& c = model_.config;
  const size_t d = c.ple_dim, D = c.hidden;
  ple_in_.resize(n * d);
  // The embedding's projection, layer l's rows of it: × hidden^-½, then normed.
  matmul(model_.ple_model_proj.row_range(l * d, d), embedded_.data(), n, ple_in_.data(), pool_);
  const float projection_scale = float(portable_pow(double(D), -0.5)), input_scale = float(portable_pow(2.0, -0.5));
  pool_.parallel_rows(n, d, [&](size_t begin, size_t end) {
    thread_local std::vector<float> token_part;
    token_part.resize(d);
    for (size_t t = begin; t < end; ++t) {
      float* in = &ple_in_[t * d];
      for (size_t i = 0; i < d; ++i) in[i] *= projection_scale;
      rmsnorm_rows(in, in, 1, model_.ple_proj_norm, d, c.norm_eps, c.norm_weight_offset);
      // The token's part of the table (ids past it read row 0, as Gemma 3n's do).
      const size_t row = size_t(row_token_[t]) < c.ple_vocab ? size_t(row_token_[t]) : 0;
      const uint8_t* table_row = model_.ple_embed.row_ptr(row);
      dequantize_row(model_.ple_embed.dtype, table_row + dtype_bytes(model_.ple_embed.dtype, l * d), d, token_part.data());
      for (size_t i = 0; i < d; ++i) in[i] = (in[i] + token_part[i] * c.ple_scale) * input_scale;
    }
  });
}

void Transformer::add_per_layer_embedding(size_t l, size_t n) {
  const ModelConfig& c = model_.config;
  const LayerWeights& w = model_.layers[l];
  const size_t d = c.ple_dim, D = c.hidden;
  per_layer_input(l, n);
  // x += post_norm(proj(act(gate(x)) ⊙ input))
  ple_gate_.resize(n * d);
  matmul(w.ple_gate, x_.data(), n, ple_gate_.data(), pool_);
  pool_.parallel_rows(n, d, [&](size_t begin, size_t end) {
    gated_activation(ple_gate_.data() + begin * d, ple_in_.data() + begin * d, (end - begin) * d, c.activation, c.swiglu_limit);
  });
  matmul(w.ple_proj, ple_gate_.data(), n, proj_.data(), pool_);
  norm_rows(proj_.data(), proj_.data(), n, w.ple_post_norm, D);
  add_rows(x_.data(), proj_.data(), n, D);
}

Status Transformer::forward(std::span<const int> tokens, size_t pos, std::vector<float>& logits) {
  if (tokens.empty()) return make_error(ErrorCode::invalid_argument, "forward needs at least one token");
  return forward_logits(tokens, pos, tokens.size() - 1, logits);
}

Status Transformer::forward_logits(std::span<const int> tokens, size_t pos, size_t first, std::vector<float>& logits) {
  const SequenceChunk chunk{&cache_, tokens, pos, first};
  return forward_batch({&chunk, 1}, logits);
}

Status Transformer::forward_tree(std::span<const int> tokens, std::span<const int> parents, size_t pos, std::vector<float>& logits) {
  const SequenceChunk chunk{&cache_, tokens, pos, 0, parents};
  return forward_batch({&chunk, 1}, logits);
}

namespace {

// A chunk's parents, checked: one per token, row 0's -1, each other row's an earlier row.
Status check_parents(const SequenceChunk& ch) {
  if (ch.parents.empty()) return Ok{};
  if (ch.parents.size() != ch.tokens.size())
    return make_error(ErrorCode::invalid_argument, "a tree of drafts has " + std::to_string(ch.parents.size()) + " parents for " +
                                                       std::to_string(ch.tokens.size()) + " tokens; expected one per token");
  if (ch.parents[0] != -1) return make_error(ErrorCode::invalid_argument, "a tree of drafts' first row must have parent -1 (the cache)");
  for (size_t t = 1; t < ch.parents.size(); ++t)
    if (ch.parents[t] < 0 || size_t(ch.parents[t]) >= t)
      return make_error(ErrorCode::invalid_argument, "row " + std::to_string(t) + " of a tree of drafts has parent " +
                                                         std::to_string(ch.parents[t]) + "; expected an earlier row (0.." +
                                                         std::to_string(t - 1) + ")");
  return Ok{};
}

}  // namespace

Status Transformer::prepare_rows(std::span<const SequenceChunk> chunks, bool output_optional) {
  const ModelConfig& c = model_.config;
  row_chunk_.clear();
  row_pos_.clear();
  row_slot_.clear();
  row_path_.clear();
  path_slots_.clear();
  row_token_.clear();
  logit_rows_.clear();
  std::vector<size_t> depth;  // a tree chunk's rows' depths
  for (size_t ci = 0; ci < chunks.size(); ++ci) {
    const SequenceChunk& ch = chunks[ci];
    const size_t n = ch.tokens.size(), pos = ch.pos;
    if (n == 0 || ch.first_logit > n || (ch.first_logit == n && !output_optional))
      return make_error(ErrorCode::invalid_argument, "forward needs at least one token to give logits for");
    if (pos + n > c.context)
      return make_error(ErrorCode::invalid_argument, "positions " + std::to_string(pos) + ".." + std::to_string(pos + n - 1) +
                                                         " exceed the model's context of " + std::to_string(c.context));
    for (size_t k = 0; k < ci; ++k)
      if (chunks[k].cache == ch.cache) return make_error(ErrorCode::invalid_argument, "a pass has two chunks of one sequence");
    for (int tok : ch.tokens)
      if (tok < 0 || size_t(tok) >= c.vocab)
        return make_error(ErrorCode::invalid_argument,
                          "token id " + std::to_string(tok) + " is outside the vocabulary (0.." + std::to_string(c.vocab - 1) + ")");
    if (auto s = check_parents(ch); !s) return s.error();
    if (auto s = check_kv_reach(kv_windows_, *ch.cache, pos); !s) return s.error();
    depth.assign(n, 0);
    for (size_t t = 0; t < n; ++t) {
      if (t >= ch.first_logit) logit_rows_.push_back(row_chunk_.size());
      row_chunk_.push_back(ci);
      if (!ch.parents.empty() && t > 0) depth[t] = depth[size_t(ch.parents[t])] + 1;
      else if (t > 0) depth[t] = t;
      row_pos_.push_back(pos + depth[t]);
      row_slot_.push_back(pos + t);
      row_token_.push_back(ch.tokens[t]);
      // Every earlier row an ancestor (depth t): the slots before its own are its path's.
      const size_t path_begin = path_slots_.size();
      if (depth[t] != t) {
        for (size_t r = t;; r = size_t(ch.parents[r])) {
          path_slots_.push_back(pos + r);
          if (r == 0) break;
        }
        std::reverse(path_slots_.begin() + long(path_begin), path_slots_.end());
      }
      row_path_.emplace_back(path_begin, path_slots_.size());
    }
  }
  const size_t n = row_chunk_.size(), D = c.hidden;  // rows of the whole pass
  x_.resize(n * D);
  xb_.resize(n * D);
  proj_.resize(n * D);
  return Ok{};
}

void embed_token(const Model& model, int token, float* out) {
  const ModelConfig& c = model.config;
  dequantize_row(model.embed.dtype, model.embed.row_ptr(token), c.hidden, out);
  if (c.embedding_scale != 1.0f)
    for (size_t i = 0; i < c.hidden; ++i) out[i] *= c.embedding_scale;
}

void Transformer::embed_rows(std::vector<float>& out) {
  const size_t D = model_.config.hidden, n = row_token_.size();
  out.resize(n * D);
  pool_.parallel_rows(n, D, [&](size_t begin, size_t end) {
    for (size_t t = begin; t < end; ++t) embed_token(model_, row_token_[t], &out[t * D]);
  });
}

Status Transformer::set_layer_ranges(std::vector<LayerRangeBackend*> ranges) {
  size_t next = 0;
  for (const LayerRangeBackend* r : ranges) {
    if (r->first_layer() != next || r->last_layer() < r->first_layer())
      return make_error(ErrorCode::invalid_argument, "the layer ranges leave layer " + std::to_string(next) +
                                                         " uncovered: ranges must cover every layer in order");
    next = r->last_layer() + 1;
  }
  if (!ranges.empty() && next != model_.config.layers)
    return make_error(ErrorCode::invalid_argument, "the layer ranges leave layers " + std::to_string(next) + "-" +
                                                       std::to_string(model_.config.layers - 1) + " uncovered");
  ranges_ = std::move(ranges);
  return Ok{};
}

std::optional<KvCache> Transformer::continue_from(const KvCache& from, size_t positions) const {
  if (ranges_.empty()) return copy_kv_prefix(model_.config, from, positions);
  KvCache out;
  out.remote = ranges_.front()->continue_from(from.remote, positions);  // (one state for every range)
  if (!out.remote) return std::nullopt;
  return out;
}

std::vector<Admission> Transformer::admit(std::span<const SequenceChunk> chunks) {
  std::vector<Admission> admissions(chunks.size());
  for (LayerRangeBackend* r : ranges_) r->admit(chunks, admissions);
  return admissions;
}

Status Transformer::forward_batch(std::span<const SequenceChunk> chunks, std::vector<float>& logits) {
  if (auto s = prepare_rows(chunks, false); !s) return s;
  embed_rows(x_);
  if (ranges_.empty()) {
    if (model_.config.ple_dim) embedded_.assign(x_.begin(), x_.end());  // what every layer's per-layer input projects
    if (auto s = run_layers(chunks, 0, model_.config.layers - 1, {}); !s) return s;
    head(true, logits);
    return Ok{};
  }
  for (size_t r = 0; r < ranges_.size(); ++r) {
    pool_.rest();  // a round trip: the cores are the shards' meanwhile, when they share them
    if (auto s = ranges_[r]->run(chunks, x_, r + 1 == ranges_.size()); !s) return s;
  }
  if (x_.size() != logit_rows_.size() * model_.config.hidden)
    return make_error(ErrorCode::internal, "a layer range answered " + std::to_string(x_.size()) + " values for " +
                                               std::to_string(logit_rows_.size()) + " rows");
  head(false, logits);
  return Ok{};
}

Status Transformer::forward_range(std::span<const SequenceChunk> chunks, size_t first, size_t last, std::span<const float> x,
                                  std::vector<float>& out, const LayerHook& before_layer) {
  const ModelConfig& c = model_.config;
  if (first > last || last >= c.layers)
    return make_error(ErrorCode::invalid_argument, "layers " + std::to_string(first) + "-" + std::to_string(last) +
                                                       " are not a range of the model's " + std::to_string(c.layers));
  if (auto s = prepare_rows(chunks, true); !s) return s;
  const size_t D = c.hidden;
  if (x.size() != row_chunk_.size() * D)
    return make_error(ErrorCode::invalid_argument, "a range's input has " + std::to_string(x.size()) + " values for " +
                                                       std::to_string(row_chunk_.size()) + " rows of " + std::to_string(D));
  std::copy(x.begin(), x.end(), x_.begin());
  if (c.ple_dim) embed_rows(embedded_);  // per-layer inputs come from the rows' tokens, never from x
  if (auto s = run_layers(chunks, first, last, before_layer); !s) return s;
  pool_.rest();  // what follows is the answer's round trip
  out.resize(logit_rows_.size() * D);
  for (size_t r = 0; r < logit_rows_.size(); ++r)
    std::copy_n(x_.begin() + long(logit_rows_[r] * D), D, out.begin() + long(r * D));
  return Ok{};
}

void Transformer::head(bool at_logit_rows, std::vector<float>& logits) {
  const ModelConfig& c = model_.config;
  const size_t D = c.hidden, rows = logit_rows_.size();
  xb_.resize(std::max(xb_.size(), rows * D));
  for (size_t t = 0; t < rows; ++t)
    norm_rows(&xb_[t * D], &x_[(at_logit_rows ? logit_rows_[t] : t) * D], 1, model_.final_norm, D);
  logits.resize(rows * c.vocab);
  matmul(model_.classifier, xb_.data(), rows, logits.data(), pool_);
  if (c.final_softcap > 0) softcap(logits.data(), logits.size(), c.final_softcap);
}

Status Transformer::run_layers(std::span<const SequenceChunk> chunks, size_t first, size_t last, const LayerHook& before_layer) {
  const ModelConfig& c = model_.config;
  const size_t D = c.hidden, n = row_chunk_.size();
  for (size_t l = first; l <= last; ++l) {
    if (before_layer)
      if (auto s = before_layer(l); !s) return s;
    const LayerWeights& w = model_.layers[l];
    const LayerConfig& lc = c.layer(l);
    const size_t Q = c.q_dim(l), KV = c.kv_dim(l), hd = lc.head_dim;
    if (q_.size() < n * Q) q_.resize(n * Q), att_out_.resize(n * Q);
    if (k_.size() < n * KV) k_.resize(n * KV), v_.resize(n * KV);
    norm_rows(xb_.data(), x_.data(), n, w.attn_norm, D);
    // Gemma 4's full layers take their values from the keys: two products there; its
    // KV-shared layers only their queries, attending over an earlier layer's cache.
    const bool owns_kv = c.owns_kv(l);
    const Product qkv[] = {{&w.wq, q_.data()}, {&w.wk, k_.data()}, {&w.wv, v_.data()}};
    matmul_shared_input({qkv, !owns_kv ? 1u : lc.values_are_keys ? 2u : 3u}, xb_.data(), n, pool_);
    if (owns_kv && lc.values_are_keys) std::memcpy(v_.data(), k_.data(), n * KV * sizeof(float));  // before k_norm and RoPE
    add_bias_rows(q_.data(), n, w.bq);
    if (c.qk_norm) norm_rows(q_.data(), q_.data(), n * c.heads, w.q_norm, hd);
    if (owns_kv) {
      add_bias_rows(k_.data(), n, w.bk);
      add_bias_rows(v_.data(), n, w.bv);
      if (c.qk_norm) norm_rows(k_.data(), k_.data(), n * lc.kv_heads, w.k_norm, hd);
      if (c.value_norm) norm_rows(v_.data(), v_.data(), n * lc.kv_heads, Matrix{}, hd);
    }
    const size_t rotated = owns_kv ? Q + KV : Q;
    pool_.parallel_rows(n, rotated, [&](size_t begin, size_t end) {
      // A position's angles, once for its query and key heads.
      const std::vector<float>& inv_freq = inv_freq_[l];
      const size_t half = inv_freq.size();
      const float magnitude = rope_magnitude_[l];
      thread_local std::vector<float> cosines, sines;
      cosines.resize(half), sines.resize(half);
      for (size_t t = begin; t < end; ++t) {
        for (size_t i = 0; i < half; ++i) {
          const float angle = float(row_pos_[t]) * inv_freq[i];
          double sine, cosine;
          portable_sincos(angle, sine, cosine);
          cosines[i] = float(cosine), sines[i] = float(sine);
          if (magnitude != 1) cosines[i] *= magnitude, sines[i] *= magnitude;
        }
        rope(&q_[t * Q], c.heads, cosines.data(), sines.data(), half);
        if (owns_kv) rope(&k_[t * KV], lc.kv_heads, cosines.data(), sines.data(), half);
      }
    });
    if (owns_kv) store_kv(l, chunks);
    attention(l, chunks);
    matmul(w.wo, att_out_.data(), n, proj_.data(), pool_);
    add_bias_rows(proj_.data(), n, w.bo);
    if (w.attn_out_norm.data) norm_rows(proj_.data(), proj_.data(), n, w.attn_out_norm, D);
    add_rows(x_.data(), proj_.data(), n, D);

    // The seam: the FFN's own norms stay here, so a shard computes only the MLP. One call
    // per layer for every row of every sequence in the pass.
    norm_rows(xb_.data(), x_.data(), n, w.ffn_norm, D);
    if (lc.sparse && !c.moe.beside_dense) {  // the router reads the FFN input; the experts are the backend's
      if (auto s = router_.route(uint32_t(l), xb_.data(), n, assignments_); !s) return s.error();
      if (auto s = ffn_.experts(uint32_t(l), xb_, n, assignments_, proj_); !s) return s.error();
    } else if (lc.sparse) {
      if (auto s = dense_and_experts(l, n); !s) return s.error();
    } else {
      if (auto s = ffn_.forward(uint32_t(l), xb_, n, proj_); !s) return s.error();
    }
    if (w.ffn_out_norm.data) norm_rows(proj_.data(), proj_.data(), n, w.ffn_out_norm, D);
    add_rows(x_.data(), proj_.data(), n, D);
    if (c.ple_dim) add_per_layer_embedding(l, n);
    if (w.output_scale.data) {  // Gemma 4: the whole hidden state, residual included
      const float scalar = load_as_f32(w.output_scale.dtype, w.output_scale.data, 0);
      pool_.parallel_rows(n, D, [&](size_t begin, size_t end) {
        for (size_t i = begin * D; i < end * D; ++i) x_[i] *= scalar;
      });
    }
  }

  return Ok{};
}

}  // namespace larql
