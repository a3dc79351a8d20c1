#include "cli/number_checks.h"
#include "cli/quantize_command.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <thread>

#include "cli/model_notes.h"
#include "model/gguf_loader.h"
#include "model/loader.h"
#include "model/quant_schemes.h"
#include "model/tensor_names.h"

namespace larql::cli {
namespace {

// A block-format input would be quantised twice; llama-quantize refuses that too.
// A weight already in a block format, named: quantising it again would round twice. MXFP4
// experts written as MXFP4 again (mxfp4_moe from GPT-OSS's own checkpoint, as llama.cpp's
// converter does) keep every value: each MXFP4 value is one again under GGML's quantiser.
std::optional<std::string> already_quantised(const Model& m, const QuantScheme& scheme) {
  std::optional<std::string> found;
  for_each_tensor(m, [&](const TensorEntry& e, size_t layer, const Matrix& w) {
    if (!found && dtype_is_blocked(w.dtype))
      found = tensor_name(e, CheckpointFormat::gguf, layer) + " is " + std::string(dtype_name(w.dtype));
  });
  for (size_t l = 0; l < m.layers.size() && !found; ++l)
    for (const ExpertWeights& e : m.layers[l].experts)
      if ((dtype_is_blocked(e.gate.dtype) || dtype_is_blocked(e.down.dtype)) &&
          !(scheme.mxfp4_experts && e.gate.dtype == DType::mxfp4 && e.up.dtype == DType::mxfp4 && e.down.dtype == DType::mxfp4))
        found = "layer " + std::to_string(l) + "'s experts are " + std::string(dtype_name(e.gate.dtype));
  return found;
}

}  // namespace

void add_quantize_command(CLI::App& app) {
  struct Options {
    std::string in, out, type = "q8_0";
    size_t splits = 1, threads = 0;
    bool pure = false;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("quantize", "Write a model (Hugging Face directory, llama2.c or GGUF file) as GGUF");
  cmd->add_option("in", o->in, "the model to read (f32, f16 or bf16 weights)")->required();
  cmd->add_option("out", o->out, "the GGUF file to write")->required();
  std::vector<std::string> names;
  for (const auto& s : kQuantSchemes) names.emplace_back(s.name);
  cmd->add_option("--type", o->type, "format of the 2-D weights, with llama.cpp's per-tensor rules for the quantised ones")
      ->check(CLI::IsMember(names))
      ->capture_default_str();
  cmd->add_flag("--pure", o->pure, "every 2-D weight in --type (rows its blocks do not divide still fall back)");
  cmd->add_option("--splits", o->splits, "write NAME-0000i-of-0000N.gguf files")->capture_default_str()->check(positive());
  cmd->add_option("--threads", o->threads, "threads quantising (default: all cores)");
  cmd->callback([o] {
    auto fail = [](const std::string& message) {
      std::cerr << "larql quantize: " << message << "\n";
      throw CLI::RuntimeError(1);
    };
    auto model = load_model(o->in);
    if (!model) fail(model.error().message);
    print_model_notes(*model, "larql quantize");
    if (auto q = already_quantised(*model, *find_quant_scheme(o->type))) fail(o->in + ": " + *q + "; quantise from the f32, f16 or bf16 model instead");
    GgufExport options{.scheme = *find_quant_scheme(o->type), .splits = o->splits, .pure = o->pure};
    const auto tokenizer = std::filesystem::path(o->in) / "tokenizer.json";
    if (std::filesystem::is_directory(o->in) && std::filesystem::exists(tokenizer)) {
      options.tokenizer_json = tokenizer.string();
    } else if (is_gguf_file(o->in)) {
      auto in = read_gguf(o->in);
      if (!in) fail(in.error().message);
      for (const auto& [key, value] : in->metadata)
        if (key.starts_with("tokenizer.")) options.tokenizer_metadata.emplace(key, value);
    }
    if (!options.tokenizer_json && options.tokenizer_metadata.empty())
      std::cerr << "larql quantize: " << o->in << " has no tokenizer; the GGUF file will carry none\n";
    ThreadPool pool(o->threads ? o->threads : std::max(1u, std::thread::hardware_concurrency()));
    options.pool = &pool;
    // Per tensor, and per format at the end: the relative RMS error of the written values.
    struct Totals {
      size_t values = 0;
      double squared_error = 0, squared_values = 0;
    };
    std::map<std::string, Totals> by_type;
    auto relative = [](double error, double values) { return values > 0 ? 100 * std::sqrt(error / values) : 0.0; };
    options.progress = [&](const TensorWritten& t) {
      std::string dims;
      size_t values = 1;
      for (size_t d : t.shape) {
        dims += (dims.empty() ? "" : " x ") + std::to_string(d);
        values *= d;
      }
      const std::string type(dtype_name(t.type));
      std::fprintf(stderr, "[%4zu/%4zu] %-28s %-5s %-14s rms error %6.3f%%\n", t.index + 1, t.count, t.name.c_str(), type.c_str(),
                   dims.c_str(), relative(t.squared_error, t.squared_values));
      Totals& total = by_type[type];
      total.values += values;
      total.squared_error += t.squared_error;
      total.squared_values += t.squared_values;
    };
    auto written = export_gguf(*model, o->out, options);
    if (!written) fail(written.error().message);
    for (const auto& [type, total] : by_type)
      std::fprintf(stderr, "larql quantize: %-5s %12zu values, rms error %.3f%% of the values' rms\n", type.c_str(), total.values,
                   relative(total.squared_error, total.squared_values));
    for (const auto& path : *written) std::cerr << "larql quantize: wrote " << path << "\n";
  });
}

}  // namespace larql::cli
