// What a model's parts weigh, read from its headers only (config.json and safetensors
// headers, or a GGUF header; no weight is read): each layer's FFN as a shard holds it (the
// dense MLP, and the experts of a mixture-of-experts layer), and what stays with the client
// (embeddings, attention, norms, routers, the classifier) plus its KV cache per position.
// `larql plan` lays a model over machines from these numbers.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "base/errors.h"

namespace larql {

struct ModelSizes {
  size_t layers = 0;
  size_t experts = 0;                 // expert ids per mixture-of-experts layer (shared ones included); 0: dense model
  std::vector<uint64_t> dense_ffn;    // per layer: MLP bytes
  std::vector<uint64_t> expert_ffn;   // per layer: all its experts' bytes (shared ones included)
  std::vector<uint64_t> layer_rest;   // per layer: its other tensors (attention, norms, routers; a session shard holds them)
  uint64_t client = 0;                // every other tensor (layer_rest's included)
  uint64_t kv_per_position = 0;       // a sequence's KV cache, bytes per position (f32) where every layer keeps it
  // Each layer that keeps a cache: the window its readers see (0: every position) and its bytes per position.
  std::vector<std::pair<size_t, uint64_t>> kv_layers;
  // Per layer: the same (bytes 0 for a layer that keeps no cache), and the layer whose cache
  // it reads (itself, or an earlier one for Gemma 4 E's KV-shared layers).
  std::vector<std::pair<size_t, uint64_t>> kv_of_layer;
  std::vector<size_t> kv_source;
  size_t context = 0;                 // the model's positions

  uint64_t ffn_total() const;
  uint64_t total() const { return ffn_total() + client; }
  // A sequence's KV cache at `positions`, run in passes of at most `pass_rows` rows: sliding
  // layers keep about their window (infer/kv_cache.h).
  uint64_t kv_bytes(size_t positions, size_t pass_rows) const;
  // The same for layers first…last only (a session shard's share of a sequence).
  uint64_t kv_bytes(size_t positions, size_t pass_rows, size_t first, size_t last) const;
  // Bytes a session shard holds for layers first…last: every tensor of them (FFN, experts,
  // attention, norms); the globals it reads besides are not counted.
  uint64_t layer_bytes(size_t first, size_t last) const;
};

// Which part of the model a tensor belongs to, by its name (Hugging Face's or GGUF's).
enum class TensorPart { client, dense_ffn, experts };
struct TensorPlace {
  TensorPart part = TensorPart::client;
  size_t layer = 0;  // dense_ffn, experts; and a client tensor's when in_layer
  bool in_layer = false;
};
TensorPlace place_tensor(const std::string& name);

// A Hugging Face directory (every *.safetensors file in it) or a GGUF file.
Result<ModelSizes> read_model_sizes(const std::string& path);

}  // namespace larql
