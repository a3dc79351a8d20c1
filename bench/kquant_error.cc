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
// sums in double) with one scale per 32, 64, 128 and 256 values, and with the two-level
// scales of the candidate contracts below: what a contract of each kind would cost.
#include <CLI/CLI.hpp>

#include <algorithm>
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
  // Candidate contracts with integer sums per super-block: per 256 values one scale
  // d = max / (L·K), per 32 an integer multiplier k in 1..K (the smallest whose steps d·k
  // reach the block's max), values rounded to ±L steps of d·k. L = 127 is an int8 as
  // vpmaddubsw's signed operand takes it; L = 255 a sign and an 8-bit magnitude (the
  // magnitude as the unsigned operand, the sign moved onto the weights by vpsignb). K is as
  // large as q6_k's int32 sums allow.
  struct Scheme {
    int levels, multipliers;
  };
  static constexpr Scheme kSchemes[] = {{127, 15}, {255, 1}, {255, 8}};
  struct Sums {
    double error = 0, exact = 0;
    double rounding[std::size(kGroups) + std::size(kSchemes)] = {};  // Σ (rounded-only − exact)² per group size, then scheme
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
  auto rounded_two_level = [](const float* x, size_t n, Scheme sc) {
    std::vector<double> out(n);
    for (size_t g = 0; g < n; g += 256) {
      double m = 0;
      for (size_t i = 0; i < 256; ++i) m = std::max(m, double(std::fabs(x[g + i])));
      if (m == 0) continue;
      const double d = m / (double(sc.levels) * sc.multipliers);
      for (size_t b = 0; b < 256; b += 32) {
        double mb = 0;
        for (size_t i = 0; i < 32; ++i) mb = std::max(mb, double(std::fabs(x[g + b + i])));
        const double k = std::clamp(std::ceil(sc.multipliers * mb / m), 1.0, double(sc.multipliers));
        for (size_t i = 0; i < 32; ++i) {
          const double q = std::clamp(std::nearbyint(x[g + b + i] / (d * k)), -double(sc.levels), double(sc.levels));
          out[g + b + i] = q * d * k;
        }
      }
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
        for (Scheme sc : kSchemes) xr.push_back(rounded_two_level(x.data(), x.size(), sc));
        for (size_t r = 0; r < m->rows; ++r) {
          dequantize_row(m->dtype, m->row_ptr(r), m->cols, w.data());
          for (size_t t = 0; t < tokens; ++t) {
            double exact = 0;
            for (size_t k = 0; k < m->cols; ++k) exact += double(w[k]) * x[t * m->cols + k];
            const double e = double(y[t * m->rows + r]) - exact;
            s.error += e * e;
            s.exact += exact * exact;
            for (size_t g = 0; g < xr.size(); ++g) {
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
    for (size_t i = 0; i < std::size(kSchemes); ++i)
      std::printf(" L%d K%d: %.4e", kSchemes[i].levels, kSchemes[i].multipliers, std::sqrt(s.rounding[std::size(kGroups) + i] / s.exact));
    std::printf("\n");
  }
  return 0;
}
