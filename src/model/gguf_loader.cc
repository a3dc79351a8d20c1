#include "model/gguf_loader.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "kernels/block_formats.h"
#include "model/families.h"
#include "model/gguf_tokenizer.h"
#include "model/rope_rows.h"
#include "model/tensor_names.h"

namespace larql {
namespace {

// Llama 3's frequency scaling as llama.cpp's converter writes it: one divisor per rotated
// pair (the rope_freqs tensor), instead of rope_scaling in the config.
std::vector<float> llama3_rope_divisors(const ModelConfig& c) {
  const Llama3RopeScaling& s = *c.rope_scaling;
  const double low_freq_wavelen = s.original_max_position / s.low_freq_factor;
  const double high_freq_wavelen = s.original_max_position / s.high_freq_factor;
  std::vector<float> out;
  for (size_t i = 0; i < c.head_dim / 2; ++i) {
    const double freq = 1.0 / std::pow(double(c.rope_theta), double(2 * i) / double(c.head_dim));
    const double wavelen = 2 * M_PI / freq;
    if (wavelen < high_freq_wavelen) out.push_back(1.0f);
    else if (wavelen > low_freq_wavelen) out.push_back(s.factor);
    else {
      const double smooth = (s.original_max_position / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
      out.push_back(float(1 / ((1 - smooth) / s.factor + smooth)));
    }
  }
  return out;
}

}  // namespace

Result<ModelConfig> gguf_model_config(const GgufFile& f, const std::string& source) {
  auto fail = [&](const std::string& what) { return make_error(ErrorCode::invalid_argument, source + ": " + what); };
  const GgufValue* arch_value = f.find("general.architecture");
  if (!arch_value || arch_value->type != GgufValueType::string) return fail("general.architecture is missing");
  const std::string arch = arch_value->text;
  const Family* family = find_gguf_family(arch);
  if (!family) return fail("architecture '" + arch + "' is not supported; expected llama, qwen2 or qwen3");

  auto number = [&](const std::string& key) { return f.number(arch + "." + key); };
  auto need = [&](const std::string& key, size_t& out) -> Status {
    const GgufValue* v = number(key);
    if (!v || v->integer <= 0 || v->integer > (int64_t(1) << 32))
      return fail(arch + "." + key + " must be a positive integer" +
                  (f.find(arch + "." + key) ? " (per-layer arrays are not supported for " + arch + ")" : ""));
    out = size_t(v->integer);
    return Ok{};
  };
  ModelConfig c;
  c.name = std::filesystem::path(source).filename().string();
  c.family = std::string(family->name);
  for (auto [key, out] : {std::pair{"embedding_length", &c.hidden}, {"block_count", &c.layers},
                          {"feed_forward_length", &c.ffn}, {"attention.head_count", &c.heads}, {"context_length", &c.context}})
    if (auto s = need(key, *out); !s) return s.error();
  c.kv_heads = c.heads;
  if (number("attention.head_count_kv"))
    if (auto s = need("attention.head_count_kv", c.kv_heads); !s) return s.error();
  c.head_dim = c.hidden / c.heads;
  if (number("attention.key_length"))
    if (auto s = need("attention.key_length", c.head_dim); !s) return s.error();
  if (c.heads % c.kv_heads != 0 || c.head_dim == 0 || c.head_dim % 2 != 0)
    return fail("head_count must be a multiple of head_count_kv, and the head size even and positive");
  if (const GgufValue* v = number("attention.layer_norm_rms_epsilon")) c.norm_eps = float(v->real);
  if (const GgufValue* v = number("rope.freq_base")) c.rope_theta = float(v->real);
  if (const GgufValue* v = f.find(arch + ".rope.scaling.type"); v && v->text != "none" && !v->text.empty())
    return fail(arch + ".rope.scaling.type '" + v->text + "' is not supported (Llama 3's rope_freqs tensor is)");
  c.rope_layout = family->gguf_permutes_qk ? RopeLayout::adjacent_pairs : RopeLayout::half_split;
  c.attention_bias = family->attention_bias;
  c.qk_norm = family->qk_norm;
  auto id = [&](const char* key) { return int(f.integer_or(key, -1)); };
  c.bos_id = id("tokenizer.ggml.bos_token_id");
  if (int eos = id("tokenizer.ggml.eos_token_id"); eos >= 0) c.eos_ids.push_back(eos);
  if (int eot = id("tokenizer.ggml.eot_token_id"); eot >= 0 && (c.eos_ids.empty() || c.eos_ids[0] != eot)) c.eos_ids.push_back(eot);
  // The vocabulary is the embedding's row count.
  auto embed = f.tensors.find("token_embd.weight");
  if (embed == f.tensors.end() || embed->second.shape.size() != 2) return fail("tensor 'token_embd.weight' is missing or not 2-D");
  c.vocab = embed->second.shape[0];
  return c;
}

Result<Model> load_gguf(const std::string& path) {
  auto file = read_gguf(path);
  if (!file) return file.error();
  auto config = gguf_model_config(*file, path);
  if (!config) return config.error();
  Model m;
  m.config = *config;
  m.files = file->files;
  auto status = assemble_model(m, CheckpointFormat::gguf, path, [&](const std::string& name) -> std::optional<FoundTensor> {
    auto it = file->tensors.find(name);
    if (it == file->tensors.end()) return std::nullopt;
    const GgufTensor& t = it->second;
    return FoundTensor{t.dtype, ggml_type_name(t.ggml_type), t.shape, t.data, t.file};
  });
  if (!status) return status.error();
  return m;
}

Result<std::vector<std::string>> export_gguf(const Model& m, const std::string& path, const GgufExport& options) {
  const ModelConfig& c = m.config;
  const Family* family = find_family(c.family);
  if (!family) return make_error(ErrorCode::invalid_argument, "export_gguf: family '" + c.family + "' has no GGUF architecture");
  const std::string arch(family->gguf_arch);
  std::map<std::string, GgufValue> meta = options.tokenizer_metadata;
  if (options.tokenizer_json) {
    std::ifstream in(*options.tokenizer_json);
    const nlohmann::json doc = nlohmann::json::parse(in, nullptr, false);
    if (doc.is_discarded() || !doc.is_object())
      return make_error(ErrorCode::invalid_argument, *options.tokenizer_json + " is not a JSON object");
    auto tok = gguf_tokenizer_metadata(doc, *options.tokenizer_json);
    if (!tok) return tok.error();
    meta = std::move(*tok);
  }
  auto u32 = [](size_t v) { return GgufValue::of(GgufValueType::u32, double(v)); };
  auto f32 = [](double v) { return GgufValue::of(GgufValueType::f32, v); };
  meta["general.architecture"] = GgufValue::of_string(arch);
  meta["general.name"] = GgufValue::of_string(c.name);
  meta["general.file_type"] = u32(options.scheme.llama_ftype);
  meta[arch + ".context_length"] = u32(c.context);
  meta[arch + ".embedding_length"] = u32(c.hidden);
  meta[arch + ".block_count"] = u32(c.layers);
  meta[arch + ".feed_forward_length"] = u32(c.ffn);
  meta[arch + ".attention.head_count"] = u32(c.heads);
  meta[arch + ".attention.head_count_kv"] = u32(c.kv_heads);
  meta[arch + ".attention.key_length"] = u32(c.head_dim);
  meta[arch + ".attention.value_length"] = u32(c.head_dim);
  meta[arch + ".rope.dimension_count"] = u32(c.head_dim);
  meta[arch + ".rope.freq_base"] = f32(c.rope_theta);
  meta[arch + ".attention.layer_norm_rms_epsilon"] = f32(c.norm_eps);
  meta[arch + ".vocab_size"] = u32(c.vocab);
  if (c.bos_id >= 0) meta["tokenizer.ggml.bos_token_id"] = u32(size_t(c.bos_id));
  if (!c.eos_ids.empty()) meta["tokenizer.ggml.eos_token_id"] = u32(size_t(c.eos_ids[0]));

  const bool permute = family->gguf_permutes_qk && c.rope_layout == RopeLayout::half_split;
  const bool tied = m.classifier.data == m.embed.data;
  size_t count = 0;
  for_each_tensor(m, [&](const TensorEntry&, size_t, const Matrix&) { ++count; });
  std::vector<GgufTensorToWrite> tensors;
  for_each_tensor(m, [&](const TensorEntry& e, size_t layer, const Matrix& w) {
    std::vector<float> values(w.rows * w.cols);
    for (size_t r = 0; r < w.rows; ++r) dequantize_row(w.dtype, w.row_ptr(r), w.cols, &values[r * w.cols]);
    // llama.cpp's converter stores these rows in the adjacent order, for its adjacent-pair RoPE.
    if (permute && e.layer_member == &LayerWeights::wq) values = reorder_rope_rows(values, c.heads, c.head_dim, w.cols, RopeLayout::adjacent_pairs);
    if (permute && e.layer_member == &LayerWeights::wk) values = reorder_rope_rows(values, c.kv_heads, c.head_dim, w.cols, RopeLayout::adjacent_pairs);
    const DType type = w.rows == 1 ? DType::f32 : matrix_type(options.scheme, e, layer, c.layers, w.cols, tied, options.pure);
    GgufTensorToWrite t{tensor_name(e, CheckpointFormat::gguf, layer), type, tensor_shape(e, c), {}};
    const size_t row_bytes = dtype_bytes(type, w.cols);
    t.bytes.resize(row_bytes * w.rows);
    // Each row quantised, then read back for the error; sums kept per row so that the
    // totals do not depend on the thread count.
    std::vector<double> row_error(w.rows), row_values(w.rows);
    auto rows = [&](size_t begin, size_t end) {
      std::vector<float> back(w.cols);
      for (size_t r = begin; r < end; ++r) {
        const float* x = &values[r * w.cols];
        blocks::quantize_row(type, x, w.cols, &t.bytes[r * row_bytes]);
        dequantize_row(type, &t.bytes[r * row_bytes], w.cols, back.data());
        for (size_t i = 0; i < w.cols; ++i) {
          row_error[r] += (double(back[i]) - x[i]) * (double(back[i]) - x[i]);
          row_values[r] += double(x[i]) * x[i];
        }
      }
    };
    if (options.pool) options.pool->parallel_for(w.rows, rows, 16);
    else rows(0, w.rows);
    if (options.progress) {
      TensorWritten done{t.name, type, t.shape, tensors.size(), count};
      for (size_t r = 0; r < w.rows; ++r) {
        done.squared_error += row_error[r];
        done.squared_values += row_values[r];
      }
      options.progress(done);
    }
    tensors.push_back(std::move(t));
  });
  if (c.rope_scaling) {
    const std::vector<float> divisors = llama3_rope_divisors(c);
    GgufTensorToWrite t{"rope_freqs.weight", DType::f32, {divisors.size()}, std::vector<uint8_t>(divisors.size() * 4)};
    std::memcpy(t.bytes.data(), divisors.data(), t.bytes.size());
    tensors.push_back(std::move(t));
  }
  return write_gguf(path, meta, tensors, options.splits);
}

}  // namespace larql
