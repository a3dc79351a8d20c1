// Weights copied to huge pages (model/huge_pages.h): the copy computes the same logits, bit
// for bit, and each role copies only the weights it computes with.
#include "model/huge_pages.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <functional>

#include "infer/local_ffn.h"
#include "infer/transformer.h"
#include "model/loader.h"
#include "support/demo_model.h"

namespace larql {
namespace {

bool in_files(const Model& model, const Matrix& m) {
  const auto* p = static_cast<const uint8_t*>(m.data);
  for (const auto& f : model.files)
    if (p >= f->data() && p + m.bytes() <= f->data() + f->size()) return true;
  return false;
}

std::vector<float> logits_of(Model& model) {
  ThreadPool pool(2);
  LocalFfn ffn(model, pool);
  Transformer t(model, ffn, pool);
  std::vector<float> logits;
  EXPECT_TRUE(t.forward(std::vector<int>{1, 300, 301, 302, 303}, 0, logits).ok());
  return logits;
}

// Places the demo model's weights for `placement` (no size floor) and checks which
// matrices moved: those `moved(layer, is_ffn)` says, and only those.
void expect_placed(HugePagePlacement placement, const std::function<bool(size_t layer, bool ffn)>& moved) {
  auto model = load_model(test::kDemo);
  ASSERT_TRUE(model.ok()) << model.error().message;
  auto copy = load_model(test::kDemo);
  placement.min_bytes = 0;
  auto placed = place_on_huge_pages(*copy, placement);
  ASSERT_TRUE(placed.ok()) << placed.error().message;
  if (!huge_pages_available()) {  // then nothing moves
    EXPECT_EQ(*placed, 0u);
    EXPECT_EQ(copy->huge_pages, nullptr);
    return;
  }
  ASSERT_NE(copy->huge_pages, nullptr);
  size_t moved_bytes = 0;
  for (size_t l = 0; l < copy->layers.size(); ++l) {
    const LayerWeights& w = copy->layers[l];
    for (const Matrix* m : {&w.wq, &w.wo, &w.attn_norm, &w.gate, &w.up, &w.down}) {
      const bool ffn = m == &w.gate || m == &w.up || m == &w.down;
      EXPECT_EQ(!in_files(*copy, *m), moved(l, ffn)) << "layer " << l << (ffn ? ", FFN" : ", attention");
      if (moved(l, ffn)) moved_bytes += m->bytes();
    }
  }
  EXPECT_GE(*placed, moved_bytes);
  EXPECT_LE(*placed, copy->huge_pages->bytes());
  if (placement.used == WeightsUsed::all) {
    EXPECT_EQ(logits_of(*copy), logits_of(*model)) << "the copy computes alike";
  }
}

TEST(HugePages, ALocalRunCopiesEveryWeightAndComputesTheSameLogits) {
  expect_placed({WeightsUsed::all}, [](size_t, bool) { return true; });
}

TEST(HugePages, AShardCopiesOnlyTheFfnOfItsLayers) {
  expect_placed({WeightsUsed::ffn, 2, 3}, [](size_t l, bool ffn) { return ffn && l >= 2 && l <= 3; });
}

TEST(HugePages, AClientWithARemoteFfnCopiesAllButTheFfn) {
  expect_placed({WeightsUsed::all_but_ffn}, [](size_t, bool ffn) { return !ffn; });
}

TEST(HugePages, TheGemmaEModelsPerLayerEmbeddingTableStaysMapped) {
  auto model = load_model((std::filesystem::path(LARQL_SOURCE_DIR) / "tests/data/gemma/gemma4e").string());
  ASSERT_TRUE(model.ok()) << model.error().message;
  auto placed = place_on_huge_pages(*model, {WeightsUsed::all, 0, 0, 0});
  ASSERT_TRUE(placed.ok()) << placed.error().message;
  if (!huge_pages_available()) {  // then nothing moves
    EXPECT_EQ(*placed, 0u);
    return;
  }
  EXPECT_TRUE(in_files(*model, model->ple_embed)) << "read a row per token: left in the file's mapping";
  EXPECT_FALSE(in_files(*model, model->ple_model_proj)) << "read whole every pass: copied";
  EXPECT_FALSE(in_files(*model, model->layers[0].ple_gate));
}

TEST(HugePages, WeightsBelowTheFloorStayInTheirMapping) {
  auto model = load_model(test::kDemo);
  ASSERT_TRUE(model.ok());
  const void* embed = model->embed.data;
  auto placed = place_on_huge_pages(*model, {WeightsUsed::all, 0, 0, size_t(1) << 40});
  ASSERT_TRUE(placed.ok());
  EXPECT_EQ(*placed, 0u);
  EXPECT_EQ(model->embed.data, embed);
  EXPECT_EQ(model->huge_pages, nullptr);
}

TEST(HugePages, WeightsBeyondTheMemoryAvailableStayInTheirMapping) {
  EXPECT_GT(memory_available_bytes(), 0u) << "/proc/meminfo has MemAvailable";
  auto model = load_model(test::kDemo);
  ASSERT_TRUE(model.ok());
  const void* embed = model->embed.data;
  HugePagePlacement placement{WeightsUsed::all, 0, 0, 0};
  placement.max_share_of_available = 1e-9;  // a few bytes: far less than the demo model's weights
  auto placed = place_on_huge_pages(*model, placement);
  ASSERT_TRUE(placed.ok());
  EXPECT_EQ(*placed, 0u);
  EXPECT_EQ(model->embed.data, embed);
}

TEST(HugePages, AModelIsPlacedOnce) {
  auto model = load_model(test::kDemo);
  ASSERT_TRUE(model.ok());
  auto first = place_on_huge_pages(*model, {WeightsUsed::all, 0, 0, 0});
  ASSERT_TRUE(first.ok());
  const void* embed = model->embed.data;
  auto second = place_on_huge_pages(*model, {WeightsUsed::all, 0, 0, 0});
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(*second, 0u);
  EXPECT_EQ(model->embed.data, embed) << "the first region stays: nothing points into a freed one";
}

}  // namespace
}  // namespace larql
