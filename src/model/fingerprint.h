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

}  // namespace larql
