#include "model/fingerprint.h"

#include <openssl/evp.h>

#include <algorithm>
#include <cstdio>

namespace larql {

std::string layer_fingerprint(const Model& model, size_t layer) {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr);
  const LayerWeights& w = model.layers.at(layer);
  const std::pair<const char*, const Matrix*> tensors[] = {{"gate", &w.gate}, {"up", &w.up}, {"down", &w.down}};
  for (const auto& [name, m] : tensors) {
    const std::string header = std::string(name) + ":" + std::string(dtype_name(m->dtype)) + ":" +
                               std::to_string(m->rows) + "x" + std::to_string(m->cols) + ";";
    EVP_DigestUpdate(ctx, header.data(), header.size());
    const auto* data = static_cast<const uint8_t*>(m->data);
    const size_t bytes = m->bytes(), edge = std::min<size_t>(bytes, 4096);
    EVP_DigestUpdate(ctx, data, edge);
    EVP_DigestUpdate(ctx, data + bytes - edge, edge);
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_DigestFinal_ex(ctx, digest, &length);
  EVP_MD_CTX_free(ctx);
  char hex[17];
  for (int i = 0; i < 8; ++i) std::snprintf(hex + 2 * i, 3, "%02x", digest[i]);
  return std::string(hex, 16);
}

}  // namespace larql
