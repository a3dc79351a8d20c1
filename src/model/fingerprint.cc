#include "model/fingerprint.h"

#include "model/weight_reader.h"

#include <openssl/evp.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace larql {

namespace {

using NamedTensors = std::vector<std::pair<std::string, const Matrix*>>;

void add_experts(NamedTensors& tensors, const LayerWeights& w, size_t first, size_t last) {
  for (size_t e = first; e <= last && e < w.experts.size(); ++e)
    for (const auto& [role, m] : {std::pair{"gate", &w.experts[e].gate}, {"up", &w.experts[e].up}, {"down", &w.experts[e].down}})
      tensors.emplace_back("expert" + std::to_string(e) + "." + role, m);
}

// 16 hex digits of SHA-256 over each tensor's name, dtype, shape and first and last 4 KiB,
// read with pread (weight_reader.h): a shard fingerprints experts it does not own.
std::string fingerprint(const Model& model, const NamedTensors& tensors) {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr);
  WeightReader reader(model);
  std::vector<uint8_t> edge_bytes(4096);
  for (const auto& [name, m] : tensors) {
    const std::string header = name + ":" + std::string(dtype_name(m->dtype)) + ":" + std::to_string(m->rows) + "x" +
                               std::to_string(m->cols) + ";";
    EVP_DigestUpdate(ctx, header.data(), header.size());
    if (!m->data) continue;
    const auto* data = static_cast<const uint8_t*>(m->data);
    const size_t bytes = m->bytes(), edge = std::min<size_t>(bytes, 4096);
    for (const uint8_t* from : {data, data + bytes - edge}) {
      reader.read(from, edge, edge_bytes.data());
      EVP_DigestUpdate(ctx, edge_bytes.data(), edge);
    }
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_DigestFinal_ex(ctx, digest, &length);
  EVP_MD_CTX_free(ctx);
  char hex[17];
  for (int i = 0; i < 8; ++i) std::snprintf(hex + 2 * i, 3, "%02x", digest[i]);
  return std::string(hex, 16);
}

}  // namespace

std::string layer_fingerprint(const Model& model, size_t layer) {
  const LayerWeights& w = model.layers.at(layer);
  // A dense FFN's gate, up and down; a sparse layer's router and its experts' matrices (Gemma 4: both).
  NamedTensors tensors;
  if (w.gate.data || w.experts.empty()) tensors = {{"gate", &w.gate}, {"up", &w.up}, {"down", &w.down}};
  if (!w.experts.empty()) tensors.emplace_back("router", &w.router);
  add_experts(tensors, w, 0, w.experts.size() - 1);
  return fingerprint(model, tensors);
}

std::string expert_fingerprint(const Model& model, size_t layer, size_t first, size_t last) {
  NamedTensors tensors;
  add_experts(tensors, model.layers.at(layer), first, last);
  return fingerprint(model, tensors);
}

}  // namespace larql
