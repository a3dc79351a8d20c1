// Per-layer FFN fingerprints (PROTOCOL §8): 16 hex digits of SHA-256 over each FFN
// tensor's name, dtype, shape and its first and last 4 KiB of data. Cheap (8 KiB read per
// tensor), yet two different models of the same hidden size never match. A client
// computes the same from its own files and refuses a shard whose fingerprints differ.
#pragma once

#include <string>

#include "model/model.h"

namespace larql {

std::string layer_fingerprint(const Model& model, size_t layer);

// The same over experts [first, last] of a mixture-of-experts layer only, in ascending id
// (PROTOCOL §12's expert_fingerprints): a client checks any split of the experts with it.
std::string expert_fingerprint(const Model& model, size_t layer, size_t first, size_t last);

// Layer-range sessions (PROTOCOL §13): every tensor of a layer (attention, norms, FFN or
// experts, per-layer scalars and inputs), as a session shard runs it whole.
std::string layer_session_fingerprint(const Model& model, size_t layer);
// SHA-256 (16 hex digits) of a canonical JSON of layers first…last's configuration and the
// model fields they read (norms, RoPE, windows, scales, softcaps, routing).
std::string session_config_fingerprint(const ModelConfig& config, size_t first, size_t last);
// The tensors such a range reads that belong to no layer: RoPE frequencies, and for
// per-layer inputs (Gemma 4 E) the embedding and the per-layer tables.
std::string session_globals_fingerprint(const Model& model);

// What a prompt's keys and values depend on (`larql run --prompt-cache`): the embedding,
// the globals, every layer's tensors (layer_session_fingerprint) and the configuration.
std::string kv_fingerprint(const Model& model);

}  // namespace larql
