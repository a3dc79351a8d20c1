// `larql synth --massive-activations`: the chosen hidden coordinates of every FFN output
// stand far above the rest, as real models' massive activations do.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <vector>

#include "infer/local_ffn.h"
#include "model/loader.h"
#include "model/synth.h"

namespace larql {
namespace {

TEST(Synth, MassiveActivationsStandAboveTheRestOfEveryFfnOutput) {
  const SynthSpec spec{.hidden = 384, .layers = 2, .ffn = 256, .heads = 6, .kv_heads = 2, .vocab = 256,
                       .context = 16, .dtype = DType::f32, .seed = 5, .massive_activations = 4};
  const auto coords = massive_coordinates(spec);
  ASSERT_EQ(coords.size(), 4u);
  EXPECT_EQ(coords[3].second, 1000.0f);
  const auto dir = std::filesystem::temp_directory_path() / ("larql_synth_massive_" + std::to_string(::getpid()));
  ASSERT_TRUE(write_synthetic_checkpoint(dir.string(), spec).ok());
  auto model = load_model(dir.string());
  ASSERT_TRUE(model.ok()) << model.error().message;
  ThreadPool pool(1);
  LocalFfn ffn(*model, pool);
  std::vector<float> x(spec.hidden), out(spec.hidden);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(float(i) * 0.37f);
  for (uint32_t layer = 0; layer < spec.layers; ++layer) {
    ASSERT_TRUE(ffn.forward(layer, x, 1, out).ok());
    std::vector<float> magnitudes(out.size());
    std::transform(out.begin(), out.end(), magnitudes.begin(), [](float v) { return std::fabs(v); });
    std::nth_element(magnitudes.begin(), magnitudes.begin() + magnitudes.size() / 2, magnitudes.end());
    const float median = magnitudes[magnitudes.size() / 2];
    for (const auto& [h, factor] : coords)  // a random row times its factor: far above the typical value
      EXPECT_GT(std::fabs(out[h]), 0.05f * factor * median) << "layer " << layer << " coordinate " << h;
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace larql
