// How far a model's K-quant products are from the same product computed exactly (the
// weights dequantised, the activations as they are, in double): the error the products'
// contract adds on top of the format's own. Built against two versions of the engine, it
// compares their contracts on the same matrices and inputs.
//
//   kquant_error MODEL.gguf [--tokens 16] [--layers 4]
//
// Inputs: Gaussian rows, and the same with one value in 64 made ten times larger (the
// outliers real activations have). Prints per format the relative RMS error
// sqrt(Σ (y − exact)² / Σ exact²) over every output of the first --layers layers, and
// beside it the error of the activations' 8-bit rounding alone (the weights exact, the
// sums in double) with one scale per 32, 64, 128 and 256 values: what a contract with
// each group size would cost.
#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdint>
#include <iterator>
#include <cstdio>
#include <map>
#include <random>
#include <vector>

#include "kernels/block_dot.h"
#include "kernels/matvec.h"
#include "kernels/thread_pool.h"
#include "model/loader.h"

using namespace larql;

int main(int argc, char** argv) {
  CLI::App app{"K-quant products' error against the exact product"};
  std::string path;
  size_t tokens = 16, layers = 4;
  app.add_option("model", path, "a GGUF with K-quant matrices")->required();
  app.add_option("--tokens", tokens, "input rows per product");
  app.add_option("--layers", layers, "layers to read");
  CLI11_PARSE(app, argc, argv);
  auto model = load_model(path);
  if (!model.ok()) {
    std::fprintf(stderr, "%s\n", model.error().message.c_str());
    return 1;
  }
  ThreadPool pool(2);
  static constexpr size_t kGroups[] = {32, 64, 128, 256};
  struct Sums {
    double error = 0, exact = 0;
    double rounding[std::size(kGroups)] = {};  // Σ (rounded-only − exact)² per group size
    size_t products = 0;
  };
  // x rounded as the block contracts round activations, one scale per `group` values.
  auto rounded = [](const float* x, size_t n, size_t group) {
    std::vector<double> out(n);
    std::vector<int8_t> q(group);
    for (size_t g = 0; g < n; g += group) {
      const float d = quantize_to_int8(x + g, group, q.data());
      for (size_t i = 0; i < group; ++i) out[g + i] = double(d) * q[i];
    }
    return out;
  };
  std::map<std::pair<std::string, bool>, Sums> by_format;  // (format, outliers)
  for (size_t l = 0; l < std::min(layers, model->layers.size()); ++l) {
    LayerWeights& lw = model->layers[l];
    for (const Matrix* m : {&lw.wq, &lw.wk, &lw.wv, &lw.wo, &lw.gate, &lw.up, &lw.down}) {
      if (!m->data || !(m->dtype == DType::q4_k || m->dtype == DType::q5_k || m->dtype == DType::q6_k)) continue;
      std::vector<float> w(m->cols);
      for (bool outliers : {false, true}) {
        std::mt19937 rng(uint32_t(l * 7 + m->cols + outliers));
        std::normal_distribution<float> normal(0, 1);
        std::vector<float> x(tokens * m->cols), y(tokens * m->rows);
        for (size_t i = 0; i < x.size(); ++i) x[i] = normal(rng) * (outliers && i % 64 == 17 ? 10.0f : 1.0f);
        matmul(*m, x.data(), tokens, y.data(), pool);
        Sums& s = by_format[{std::string(dtype_name(m->dtype)), outliers}];
        std::vector<std::vector<double>> xr;  // [group size][tokens × cols]
        for (size_t group : kGroups) xr.push_back(rounded(x.data(), x.size(), group));
        for (size_t r = 0; r < m->rows; ++r) {
          dequantize_row(m->dtype, m->row_ptr(r), m->cols, w.data());
          for (size_t t = 0; t < tokens; ++t) {
            double exact = 0;
            for (size_t k = 0; k < m->cols; ++k) exact += double(w[k]) * x[t * m->cols + k];
            const double e = double(y[t * m->rows + r]) - exact;
            s.error += e * e;
            s.exact += exact * exact;
            for (size_t g = 0; g < std::size(kGroups); ++g) {
              double approx = 0;
              for (size_t k = 0; k < m->cols; ++k) approx += double(w[k]) * xr[g][t * m->cols + k];
              s.rounding[g] += (approx - exact) * (approx - exact);
            }
          }
        }
        ++s.products;
      }
    }
  }
  for (const auto& [key, s] : by_format) {
    std::printf("%s %s inputs: relative RMS error %.4e over %zu products; the activations' rounding alone, a scale per", key.first.c_str(),
                key.second ? "outlier" : "gaussian", std::sqrt(s.error / s.exact), s.products);
    for (size_t g = 0; g < std::size(kGroups); ++g) std::printf(" %zu: %.4e", kGroups[g], std::sqrt(s.rounding[g] / s.exact));
    std::printf("\n");
  }
  return 0;
}
