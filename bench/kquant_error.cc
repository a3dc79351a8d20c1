// How far a model's K-quant products are from the same product computed exactly (the
// weights dequantised, the activations as they are, in double): the error the products'
// contract adds on top of the format's own. Built against two versions of the engine, it
// compares their contracts on the same matrices and inputs.
//
//   kquant_error MODEL.gguf [--tokens 16] [--layers 4]
//
// Inputs: Gaussian rows, and the same with one value in 64 made ten times larger (the
// outliers real activations have). Prints per format the relative RMS error
// sqrt(Σ (y − exact)² / Σ exact²) over every output of the first --layers layers.
#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <vector>

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
  struct Sums {
    double error = 0, exact = 0;
    size_t products = 0;
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
        for (size_t r = 0; r < m->rows; ++r) {
          dequantize_row(m->dtype, m->row_ptr(r), m->cols, w.data());
          for (size_t t = 0; t < tokens; ++t) {
            double exact = 0;
            for (size_t k = 0; k < m->cols; ++k) exact += double(w[k]) * x[t * m->cols + k];
            const double e = double(y[t * m->rows + r]) - exact;
            s.error += e * e;
            s.exact += exact * exact;
          }
        }
        ++s.products;
      }
    }
  }
  for (const auto& [key, s] : by_format)
    std::printf("%s %s inputs: relative RMS error %.4e over %zu products\n", key.first.c_str(), key.second ? "outlier" : "gaussian",
                std::sqrt(s.error / s.exact), s.products);
  return 0;
}
