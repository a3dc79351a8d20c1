// The llama2.c checkpoint loader's header checks: the file's size must be what the
// header implies, computed so that no header can wrap it onto a small file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "model/llama2c_loader.h"

namespace larql {
namespace {

namespace fs = std::filesystem;

class Llama2cFile : public ::testing::Test {
 protected:
  void TearDown() override { fs::remove(path_); }
  // The seven header fields, then `floats` zeros.
  std::string write(const std::vector<int32_t>& header, size_t floats) {
    std::ofstream out(path_, std::ios::binary);
    out.write(reinterpret_cast<const char*>(header.data()), std::streamsize(header.size() * 4));
    const std::vector<float> zeros(floats);
    out.write(reinterpret_cast<const char*>(zeros.data()), std::streamsize(floats * 4));
    return path_.string();
  }
  fs::path path_ = fs::temp_directory_path() / ("larql_llama2c_" + std::to_string(::getpid()) + "_" +
                                                ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".bin");
};

// dim 8, hidden 16, 1 layer, 2 heads, 1 kv head (head_dim 4), vocab 4 (shared), seq_len 4.
const std::vector<int32_t> kSmall = {8, 16, 1, 2, 1, 4, 4};
// embed 4·8, attn_norm 8, wq 8·8, wk and wv 4·8 each, wo 8·8, ffn_norm 8, gate, down and
// up 16·8 each, final_norm 8, RoPE tables 2 · 4·2.
constexpr size_t kSmallFloats = 32 + 8 + 64 + 2 * 32 + 64 + 8 + 3 * 128 + 8 + 16;

TEST_F(Llama2cFile, LoadsAFileOfTheImpliedSize) {
  const auto m = load_llama2c(write(kSmall, kSmallFloats));
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_EQ(m->config.hidden, 8u);
  EXPECT_EQ(m->config.kv_dim(), 4u);
  ASSERT_EQ(m->layers.size(), 1u);
  EXPECT_EQ(m->layers[0].up.rows, 16u);
}

TEST_F(Llama2cFile, RefusesAFileOneFloatShortOrLong) {
  for (const size_t floats : {kSmallFloats - 1, kSmallFloats + 1}) {
    const auto m = load_llama2c(write(kSmall, floats));
    ASSERT_FALSE(m);
    EXPECT_NE(m.error().message.find("implies " + std::to_string(28 + 4 * kSmallFloats)), std::string::npos)
        << m.error().message;
  }
}

// dim 2^30, hidden 2, 2^30 layers, one head, vocab 2^31 - 1 with its own classifier,
// seq_len 1: in 64 bits the implied size wraps to exactly the 28-byte header, and the
// tensors would be mapped past the end of the file.
TEST_F(Llama2cFile, RefusesAHeaderWhoseSizeWrapsIn64Bits) {
  const auto m = load_llama2c(write({1 << 30, 2, 1 << 30, 1, 1, -2147483647, 1}, 0));
  ASSERT_FALSE(m);
  EXPECT_NE(m.error().message.find("file has 28 bytes"), std::string::npos) << m.error().message;
  EXPECT_NE(m.error().message.find("implies 19807040683906316619514642460"), std::string::npos)
      << m.error().message;
}

}  // namespace
}  // namespace larql
