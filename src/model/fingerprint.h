// Per-layer FFN fingerprints (PROTOCOL §8): 16 hex digits of SHA-256 over each FFN
// tensor's name, dtype, shape and its first and last 4 KiB of data. Cheap (8 KiB read per
// tensor), yet two different models of the same hidden size never match. A client
// computes the same from its own files and refuses a shard whose fingerprints differ.
#pragma once

#include <string>

#include "model/model.h"

namespace larql {

std::string layer_fingerprint(const Model& model, size_t layer);

}  // namespace larql
