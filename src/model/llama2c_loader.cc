#include "model/llama2c_loader.h"

#include <cstring>
#include <filesystem>

namespace larql {
namespace {

using u128 = unsigned __int128;

Error bad(const std::string& path, const std::string& what) {
  return make_error(ErrorCode::invalid_argument, path + ": " + what);
}

std::string decimal(u128 v) {
  std::string digits;
  do digits.insert(digits.begin(), char('0' + int(v % 10))); while ((v /= 10) != 0);
  return digits;
}

}  // namespace

Result<Model> load_llama2c(const std::string& path) {
  auto file = MappedFile::open(path);
  if (!file) return file.error();
  const auto& f = **file;
  constexpr size_t kHeader = 7 * 4;
  if (f.size() < kHeader) return bad(path, "file has " + std::to_string(f.size()) + " bytes, too short for the 28-byte llama2.c header");
  int32_t h[7];
  std::memcpy(h, f.data(), kHeader);
  const char* names[] = {"dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "seq_len"};
  for (int i = 0; i < 7; ++i)
    if (h[i] == 0 || (i != 5 && h[i] < 0))
      return bad(path, std::string("header field ") + names[i] + " = " + std::to_string(h[i]) + "; expected a positive number");

  Model m;
  ModelConfig& c = m.config;
  c.name = std::filesystem::path(path).filename().string();
  c.family = "llama";
  c.hidden = size_t(h[0]);
  c.ffn = size_t(h[1]);
  c.layers = size_t(h[2]);
  c.heads = size_t(h[3]);
  c.kv_heads = size_t(h[4]);
  const bool shared_classifier = h[5] > 0;
  c.vocab = size_t(h[5] < 0 ? -int64_t(h[5]) : h[5]);
  c.context = size_t(h[6]);
  if (c.hidden % c.heads != 0 || c.heads % c.kv_heads != 0)
    return bad(path, "dim " + std::to_string(c.hidden) + " must be a multiple of n_heads " + std::to_string(c.heads) +
                         ", and n_heads of n_kv_heads " + std::to_string(c.kv_heads));
  c.head_dim = c.hidden / c.heads;
  c.norm_eps = 1e-5f;
  c.rope_layout = RopeLayout::adjacent_pairs;
  c.activation = Activation::silu;
  c.bos_id = 1;
  c.eos_ids = {1};  // run.c stops when it samples BOS; it prints EOS (2) as text

  // Tensor sizes in floats, in file order; bounds are checked once against the file size.
  // In 128 bits: products of three header fields reach 2^93, and a header whose 64-bit
  // size wrapped onto its file's would map tensors past the file's end.
  const size_t L = c.layers, D = c.hidden, F = c.ffn, Q = c.q_dim(), KV = c.kv_dim();
  const size_t rope_table = c.context * (c.head_dim / 2);  // fits: both fields below 2^31
  const u128 l = L, d = D, ff = F, q = Q, kv = KV, v = c.vocab;
  const u128 implied = kHeader + 4 * (v * d + l * d + l * d * q + 2 * l * d * kv + l * q * d + l * d + 3 * l * d * ff +
                                      d + 2 * u128(rope_table) + (shared_classifier ? 0 : v * d));
  if (u128(f.size()) != implied)
    return bad(path, "file has " + std::to_string(f.size()) + " bytes; the header (dim " + std::to_string(D) +
                         ", hidden_dim " + std::to_string(F) + ", " + std::to_string(L) + " layers, vocab " +
                         std::to_string(c.vocab) + ", seq_len " + std::to_string(c.context) + ") implies " +
                         decimal(implied));
  c.set_uniform_layers(RopeSpec{});  // base 10000: after the check, which bounds the layers

  const uint8_t* p = f.data() + kHeader;
  auto take = [&](size_t rows, size_t cols) {
    Matrix mat{DType::f32, rows, cols, p};
    p += rows * cols * 4;
    return mat;
  };
  auto per_layer = [&](size_t rows, size_t cols) {
    std::vector<Matrix> out;
    for (size_t l = 0; l < L; ++l) out.push_back(take(rows, cols));
    return out;
  };
  m.embed = take(c.vocab, D);
  auto attn_norm = per_layer(1, D);
  auto wq = per_layer(Q, D);
  auto wk = per_layer(KV, D);
  auto wv = per_layer(KV, D);
  auto wo = per_layer(D, Q);
  auto ffn_norm = per_layer(1, D);
  auto gate = per_layer(F, D);
  auto down = per_layer(D, F);
  auto up = per_layer(F, D);
  m.final_norm = take(1, D);
  p += 2 * rope_table * 4;  // run.c's precomputed RoPE tables: we compute RoPE ourselves
  m.classifier = shared_classifier ? m.embed : take(c.vocab, D);
  for (size_t l = 0; l < L; ++l) {
    LayerWeights lw;
    lw.attn_norm = attn_norm[l];
    lw.wq = wq[l];
    lw.wk = wk[l];
    lw.wv = wv[l];
    lw.wo = wo[l];
    lw.ffn_norm = ffn_norm[l];
    lw.gate = gate[l];
    lw.up = up[l];
    lw.down = down[l];
    m.layers.push_back(lw);
  }
  m.files.push_back(*file);
  return m;
}

}  // namespace larql
