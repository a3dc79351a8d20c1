// The GGUF container: what the writer writes the reader reads back (metadata of every
// type, tensors of every format, alignment, split files); every malformed header is a
// clear error naming what was wrong, never a crash; a file is known by its magic.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <fstream>
#include <random>

#include "model/gguf.h"
#include "model/gguf_loader.h"
#include "model/loader.h"
#include "model/synth.h"
#include "support/reference_fixtures.h"
#include "infer/local_ffn.h"
#include "infer/transformer.h"
#include <nlohmann/json.hpp>
#include <cmath>

namespace larql {
namespace {

namespace fs = std::filesystem;

class Gguf : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("larql_gguf_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::vector<uint8_t> read_bytes(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
  }
  std::string error_of(const std::vector<uint8_t>& bytes) {
    auto r = parse_gguf(bytes.data(), bytes.size(), "bad.gguf");
    return r.ok() ? std::string("(accepted)") : r.error().message;
  }
  // A small valid file: two metadata keys and one f32 tensor of 4 values.
  std::vector<uint8_t> small_file() {
    std::map<std::string, GgufValue> meta{{"general.architecture", GgufValue::of_string("llama")},
                                          {"answer", GgufValue::of(GgufValueType::u32, 42)}};
    std::vector<uint8_t> values(16);
    const float v[4] = {1, 2, 3, 4};
    std::memcpy(values.data(), v, 16);
    EXPECT_TRUE(write_gguf((dir_ / "small.gguf").string(), meta, {{"t", DType::f32, {4}, values}}).ok());
    return read_bytes(dir_ / "small.gguf");
  }

  // A small random-weight Hugging Face checkpoint in dir_/hf (hidden 64, ffn 96, 2 heads).
  fs::path small_checkpoint(size_t layers, size_t kv_heads, uint64_t seed, size_t context = 32) {
    const fs::path hf = dir_ / "hf";
    EXPECT_TRUE(write_synthetic_checkpoint(hf.string(), {.hidden = 64, .layers = layers, .ffn = 96, .heads = 2,
                                                         .kv_heads = kv_heads, .vocab = 256, .context = context,
                                                         .dtype = DType::f32, .seed = seed})
                    .ok());
    return hf;
  }

  using Edit = std::function<void(GgufFile&, std::vector<GgufTensorToWrite>&, std::map<std::string, GgufValue>&)>;
  // `path` read, edited, written to dir_/edited.gguf and loaded: "(loaded)" or the error.
  std::string load_edited(const fs::path& path, const Edit& edit) {
    auto f = read_gguf(path.string());
    EXPECT_TRUE(f.ok());
    std::vector<GgufTensorToWrite> tensors;
    for (const auto& [name, t] : f->tensors) tensors.push_back({name, *t.dtype, t.shape, std::vector<uint8_t>(t.data, t.data + t.bytes)});
    auto meta = f->metadata;
    edit(*f, tensors, meta);
    const fs::path out = dir_ / "edited.gguf";
    EXPECT_TRUE(write_gguf(out.string(), meta, tensors).ok());
    auto m = load_model(out.string());
    return m.ok() ? std::string("(loaded)") : m.error().message;
  }

  fs::path dir_;
};

TEST_F(Gguf, WhatTheWriterWritesTheReaderReads) {
  std::map<std::string, GgufValue> meta{
      {"a.u8", GgufValue::of(GgufValueType::u8, 200)},        {"a.i16", GgufValue::of(GgufValueType::i16, -300)},
      {"a.u32", GgufValue::of(GgufValueType::u32, 70000)},    {"a.i64", GgufValue::of(GgufValueType::i64, -5e12)},
      {"a.f32", GgufValue::of(GgufValueType::f32, 0.25)},     {"a.f64", GgufValue::of(GgufValueType::f64, 1e-300)},
      {"a.bool", GgufValue::of(GgufValueType::boolean, 1)},   {"a.str", GgufValue::of_string("héllo")},
      {"a.strs", GgufValue::of_strings({"x", "", "yz"})},     {"a.f32s", GgufValue::of_array(GgufValueType::f32, {1.5, -2})},
      {"a.i32s", GgufValue::of_array(GgufValueType::i32, {3, -4, 5})}};
  std::mt19937 rng(3);
  std::vector<GgufTensorToWrite> tensors;
  for (const auto& d : kDTypes) {
    GgufTensorToWrite t{"w." + std::string(d.name), d.type, {3, 256}, std::vector<uint8_t>(dtype_bytes(d.type, 3 * 256))};
    for (auto& b : t.bytes) b = uint8_t(rng());
    tensors.push_back(std::move(t));
  }
  auto written = write_gguf((dir_ / "all.gguf").string(), meta, tensors, 1, 64);
  ASSERT_TRUE(written.ok()) << written.error().message;
  auto f = read_gguf((dir_ / "all.gguf").string());
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ(f->version, 3u);
  EXPECT_EQ(f->alignment, 64u);
  EXPECT_EQ(f->find("a.u8")->integer, 200);
  EXPECT_EQ(f->find("a.i16")->integer, -300);
  EXPECT_EQ(f->find("a.u32")->integer, 70000);
  EXPECT_EQ(f->find("a.i64")->integer, -5'000'000'000'000);
  EXPECT_EQ(f->find("a.f32")->real, 0.25);
  EXPECT_EQ(f->find("a.f64")->real, 1e-300);
  EXPECT_EQ(f->find("a.bool")->integer, 1);
  EXPECT_EQ(f->find("a.str")->text, "héllo");
  EXPECT_EQ(f->find("a.strs")->strings, (std::vector<std::string>{"x", "", "yz"}));
  EXPECT_EQ(f->find("a.f32s")->real_at(0), 1.5);
  EXPECT_EQ(f->find("a.f32s")->real_at(1), -2.0);
  const GgufValue* i32s = f->find("a.i32s");
  ASSERT_EQ(i32s->count(), 3u);
  EXPECT_EQ(i32s->integer_at(0), 3);
  EXPECT_EQ(i32s->integer_at(1), -4);
  EXPECT_EQ(i32s->integer_at(2), 5);
  EXPECT_EQ(i32s->elements.size(), 12u) << "kept as stored: 4 bytes an element";
  const uint8_t* base = f->files.front()->data();
  for (const auto& t : tensors) {
    const GgufTensor& got = f->tensors.at(t.name);
    EXPECT_EQ(got.dtype, t.dtype) << t.name;
    EXPECT_EQ(got.ggml_type, dtype_traits(t.dtype).ggml_type);
    EXPECT_EQ(got.shape, t.shape);
    EXPECT_EQ(size_t(got.data - base) % 64, 0u) << t.name << " is not aligned";
    ASSERT_EQ(got.bytes, t.bytes.size());
    EXPECT_EQ(std::memcmp(got.data, t.bytes.data(), got.bytes), 0) << t.name;
  }
}

TEST_F(Gguf, SplitFilesAreReadFromTheFirst) {
  std::vector<GgufTensorToWrite> tensors;
  // Names built by append: GCC 12 warns (-Wrestrict, falsely) on "t" + std::to_string(i).
  auto name = [](int i) { return std::string("t").append(std::to_string(i)); };
  for (int i = 0; i < 5; ++i) tensors.push_back({name(i), DType::f32, {2}, std::vector<uint8_t>(8, uint8_t(i))});
  auto paths = write_gguf((dir_ / "m.gguf").string(), {{"k", GgufValue::of_string("v")}}, tensors, 3);
  ASSERT_TRUE(paths.ok()) << paths.error().message;
  ASSERT_EQ(paths->size(), 3u);
  EXPECT_EQ(fs::path((*paths)[0]).filename(), "m-00001-of-00003.gguf");
  auto f = read_gguf((*paths)[0]);
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ(f->tensors.size(), 5u);
  EXPECT_EQ(f->files.size(), 3u);
  EXPECT_EQ(f->find("k")->text, "v");
  for (int i = 0; i < 5; ++i) EXPECT_EQ(f->tensors.at(name(i)).data[0], uint8_t(i));
  // A later part alone, or a missing part, is an error naming the file.
  auto second = read_gguf((*paths)[1]);
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.error().message.find("00001-of-00003"), std::string::npos) << second.error().message;
  fs::remove((*paths)[2]);
  auto missing = read_gguf((*paths)[0]);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("m-00003-of-00003.gguf"), std::string::npos) << missing.error().message;
}

TEST_F(Gguf, EveryTruncationIsAnErrorNeverACrash) {
  const auto bytes = small_file();
  auto whole = parse_gguf(bytes.data(), bytes.size(), "small.gguf");
  ASSERT_TRUE(whole.ok()) << whole.error().message;
  const GgufTensor& t = whole->tensors.at("t");
  const size_t needed = size_t(t.data - bytes.data()) + t.bytes;  // the rest is padding
  for (size_t n = 0; n < bytes.size(); ++n) {
    const std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + std::ptrdiff_t(n));
    const std::string e = error_of(cut);
    if (n >= needed) {
      EXPECT_EQ(e, "(accepted)") << "cut at " << n;
      continue;
    }
    EXPECT_NE(e, "(accepted)") << "cut at " << n;
    EXPECT_EQ(e.rfind("bad.gguf: ", 0), 0u) << e;
  }
}

// A header of one key: an array of n elements of `element` (u8 ones, or empty strings).
std::vector<uint8_t> one_array_header(GgufValueType element, uint64_t n) {
  std::vector<uint8_t> b;
  auto put = [&](const auto& v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    b.insert(b.end(), p, p + sizeof(v));
  };
  put(uint32_t(0x46554747)), put(uint32_t(3)), put(uint64_t(0)), put(uint64_t(1));
  const std::string key = "crafted.array";
  put(uint64_t(key.size()));
  b.insert(b.end(), key.begin(), key.end());
  put(uint32_t(GgufValueType::array)), put(uint32_t(element)), put(n);
  b.resize(b.size() + (element == GgufValueType::string ? 8 : 1) * n, element == GgufValueType::string ? 0 : 1);
  return b;
}

// Metadata arrays cost their stored bytes (a u8 array took 16 bytes an element, and a
// 100 MB file 1.7 GB, before: docs/benchmarks/history.md), and what a header would take in memory
// is bounded by the file's size: an array of empty strings (32 bytes each in memory, 8 in
// the file) beyond the budget is refused naming its key, before it is allocated.
TEST_F(Gguf, MetadataArraysTakeTheirStoredBytesAndABudgetBoundsTheRest) {
  const size_t n = 1 << 20;
  const auto bytes = one_array_header(GgufValueType::u8, n);
  auto f = parse_gguf(bytes.data(), bytes.size(), "u8.gguf");
  ASSERT_TRUE(f.ok()) << f.error().message;
  const GgufValue* v = f->find("crafted.array");
  ASSERT_EQ(v->count(), n);
  EXPECT_EQ(v->elements.size(), n) << "one byte an element, as stored";
  EXPECT_EQ(v->integer_at(n - 1), 1);
  EXPECT_THROW(v->integer_at(n), std::out_of_range);
  // Strings within the budget are read; 3 M empty ones (a 24 MB header asking for 96 MB) are not.
  const auto few = one_array_header(GgufValueType::string, 1000);
  EXPECT_EQ(error_of(few), "(accepted)");
  const auto many = one_array_header(GgufValueType::string, 3'000'000);
  const std::string e = error_of(many);
  EXPECT_NE(e.find("key 'crafted.array' would take the metadata past"), std::string::npos) << e;
}

TEST_F(Gguf, MalformedHeadersNameWhatWasWrong) {
  const auto good = small_file();
  auto patched = [&](size_t at, const void* value, size_t n) {
    auto b = good;
    std::memcpy(&b[at], value, n);
    return b;
  };
  auto expect = [&](const std::vector<uint8_t>& bytes, const std::string& needle) {
    const std::string e = error_of(bytes);
    EXPECT_NE(e.find(needle), std::string::npos) << "expected '" << needle << "' in: " << e;
  };
  expect(patched(0, "GGML", 4), "magic");
  const uint32_t v2 = 2;
  EXPECT_EQ(error_of(patched(4, &v2, 4)), "(accepted)");  // v2 and v3 differ only in what v3 allows
  const uint32_t v1 = 1, big = 0x03000000;
  expect(patched(4, &v1, 4), "version 1 is not supported; expected 2 or 3");
  expect(patched(4, &big, 4), "big-endian");
  const uint64_t huge = uint64_t(1) << 40;
  expect(patched(16, &huge, 8), "more than the file");  // metadata count
  // The first key's length (keys are written sorted: "answer" first).
  expect(patched(24, &huge, 8), "runs past the end of the file");
  // Its value type.
  const uint32_t bad_type = 13;
  expect(patched(24 + 8 + 6, &bad_type, 4), "value type 13");
  // The tensor: find its record after the metadata and break it field by field.
  const std::string name = "t";
  size_t at = 0;
  for (size_t i = 0; i + 9 < good.size(); ++i)
    if (good[i] == 1 && std::memcmp(&good[i + 1], "\0\0\0\0\0\0\0t", 8) == 0) at = i + 9;  // after "t"'s length and name
  ASSERT_NE(at, 0u);
  const uint32_t five_dims = 5, q2k = 10;
  expect(patched(at, &five_dims, 4), "tensor 't' has 5 dimensions");
  const uint64_t zero = 0, far = 1 << 20, misaligned = 4;
  expect(patched(at + 4, &zero, 8), "dimension 0 = 0");
  expect(patched(at + 4 + 8 + 4, &far, 8), "outside the");
  expect(patched(at + 4 + 8 + 4, &misaligned, 8), "not a multiple of the alignment");
  // An unknown tensor type parses (its data is never touched) and is refused on use.
  EXPECT_EQ(error_of(patched(at + 4 + 8, &q2k, 4)), "(accepted)");
}

TEST_F(Gguf, ModelErrorsNameTheTensorAndItsType) {
  const fs::path hf = small_checkpoint(2, 2, 4);
  auto model = load_model(hf.string());
  ASSERT_TRUE(model.ok()) << model.error().message;
  // By magic, not by name: a GGUF file called .bin loads as GGUF.
  const fs::path path = dir_ / "model.bin";
  ASSERT_TRUE(export_gguf(*model, path.string(), {.scheme = *find_quant_scheme("q8_0"), .tokenizer_json = hf.string() + "/tokenizer.json", .splits = 1}).ok());
  auto loaded = load_model(path.string());
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  EXPECT_EQ(loaded->layers[1].down.dtype, DType::q8_0);
  EXPECT_EQ(loaded->final_norm.dtype, DType::f32);

  auto rewrite = [&](const Edit& edit) { return load_edited(path, edit); };
  // A shape that disagrees with the metadata.
  std::string e = rewrite([](GgufFile&, auto&, auto& meta) { meta["llama.feed_forward_length"] = GgufValue::of(GgufValueType::u32, 128); });
  EXPECT_NE(e.find("tensor 'blk.0.ffn_gate.weight' has shape [96, 64], expected [128, 64]"), std::string::npos) << e;
  // A missing tensor, a missing key, an unknown architecture.
  e = rewrite([](GgufFile&, auto& tensors, auto&) {
    std::erase_if(tensors, [](const GgufTensorToWrite& t) { return t.name == "blk.1.attn_k.weight"; });
  });
  EXPECT_NE(e.find("tensor 'blk.1.attn_k.weight' is missing"), std::string::npos) << e;
  e = rewrite([](GgufFile&, auto&, auto& meta) { meta.erase("llama.block_count"); });
  EXPECT_NE(e.find("llama.block_count must be a positive integer"), std::string::npos) << e;
  // A layer count no file could hold is refused before anything is sized by it.
  e = rewrite([](GgufFile&, auto&, auto& meta) { meta["llama.block_count"] = GgufValue::of(GgufValueType::u32, 4e9); });
  EXPECT_NE(e.find("llama.block_count is 4000000000 but the file has only"), std::string::npos) << e;
  e = rewrite([](GgufFile&, auto&, auto& meta) { meta["general.architecture"] = GgufValue::of_string("mamba"); });
  EXPECT_NE(e.find("architecture 'mamba' is not supported"), std::string::npos) << e;
}

// A mixture-of-experts or Gemma 4 E-model file read as a dense model computes wrong tokens
// without a word: such files are refused by the key or tensor that makes them one.
TEST_F(Gguf, MixtureOfExpertsAndEModelFilesAreRefusedByName) {
  const fs::path hf = small_checkpoint(2, 2, 4);
  auto model = load_model(hf.string());
  ASSERT_TRUE(model.ok()) << model.error().message;
  const fs::path path = dir_ / "dense.gguf";
  ASSERT_TRUE(export_gguf(*model, path.string(), {.scheme = *find_quant_scheme("f32"), .splits = 1}).ok());
  ASSERT_EQ(load_edited(path, [](auto&, auto&, auto&) {}), "(loaded)");
  auto u32 = [](double v) { return GgufValue::of(GgufValueType::u32, v); };
  auto with_tensor = [&](const std::string& name, std::vector<size_t> shape) {
    return load_edited(path, [&](auto&, auto& tensors, auto&) {
      size_t values = 1;
      for (size_t d : shape) values *= d;
      tensors.push_back({name, DType::f32, shape, std::vector<uint8_t>(values * 4)});
    });
  };
  // llama with experts is Mixtral, which needs its top-k; without expert_count its expert tensors are refused.
  std::string e = load_edited(path, [&](auto&, auto&, auto& meta) { meta["llama.expert_count"] = u32(8); });
  EXPECT_NE(e.find("llama.expert_used_count must be a positive integer"), std::string::npos) << e;
  // The router alone (Gemma 4 MoE files mark MoE layers by it), stacked experts, old Mixtral's per-expert tensors.
  for (const auto& [name, shape] : {std::pair<std::string, std::vector<size_t>>{"blk.0.ffn_gate_inp.weight", {4, 64}},
                                    {"blk.1.ffn_down_exps.weight", {4, 64, 96}},
                                    {"blk.0.ffn_gate.3.weight", {96, 64}}}) {
    e = with_tensor(name, shape);
    EXPECT_NE(e.find("tensor '" + name + "' is a mixture-of-experts tensor, but llama.expert_count is missing"), std::string::npos) << e;
  }
  e = load_edited(path, [&](auto&, auto&, auto& meta) { meta["llama.embedding_length_per_layer_input"] = u32(256); });
  EXPECT_NE(e.find("llama.embedding_length_per_layer_input is set: per-layer embeddings and shared KV layers are Gemma 4's"), std::string::npos) << e;
  e = load_edited(path, [&](auto&, auto&, auto& meta) { meta["llama.attention.shared_kv_layers"] = u32(1); });
  EXPECT_NE(e.find("llama.attention.shared_kv_layers is set"), std::string::npos) << e;
  e = with_tensor("per_layer_token_embd.weight", {256, 64});
  EXPECT_NE(e.find("'per_layer_token_embd.weight' is a per-layer embedding (Gemma 4's E models), not llama's"), std::string::npos) << e;
}

TEST_F(Gguf, GemmaEModelKeysAreCheckedNamingTheKey) {
  auto model = load_model(test::gemma_fixture("gemma4e").string());
  ASSERT_TRUE(model.ok()) << model.error().message;
  const fs::path path = dir_ / "e.gguf";
  ASSERT_TRUE(export_gguf(*model, path.string(), {.scheme = *find_quant_scheme("f32"), .splits = 1}).ok());
  auto file = read_gguf(path.string());
  ASSERT_TRUE(file.ok());
  const GgufValue& widths = file->metadata.at("gemma4.feed_forward_length");
  ASSERT_EQ(widths.count(), 10u) << "one width per layer, as llama.cpp's converter writes a double-wide model";
  EXPECT_EQ(widths.integer_at(6), 64);
  EXPECT_EQ(widths.integer_at(7), 128);
  EXPECT_EQ(file->metadata.at("gemma4.attention.shared_kv_layers").integer, 3);
  EXPECT_EQ(file->metadata.at("gemma4.embedding_length_per_layer_input").integer, 8);
  auto u32 = [](double v) { return GgufValue::of(GgufValueType::u32, v); };
  for (auto [key, value, expected] :
       {std::tuple{"gemma4.attention.shared_kv_layers", u32(10), "must leave at least one of the 10 layers with a KV cache"},
        {"gemma4.attention.shared_kv_layers", GgufValue::of_string("3"), "gemma4.attention.shared_kv_layers must be a whole number"},
        {"gemma4.embedding_length_per_layer_input", u32(16), "tensor 'per_layer_token_embd.weight' has shape [256, 80], expected [256, 160]"},
        {"gemma4.feed_forward_length", GgufValue::of_array(GgufValueType::u32, {64, 64}), "gemma4.feed_forward_length has 2 entries for 10 layers"},
        {"gemma4.feed_forward_length", u32(64), "tensor 'blk.7.ffn_gate.weight' has shape [128, 64], expected [64, 64]"}}) {
    const std::string e = load_edited(path, [&](auto&, auto&, auto& meta) { meta[key] = value; });
    EXPECT_NE(e.find(expected), std::string::npos) << e;
  }
  // A file whose KV-shared layers carry K/V tensors anyway loads, ignoring them (llama.cpp's optional ones).
  EXPECT_EQ(load_edited(path, [&](auto&, auto& tensors, auto&) {
              tensors.push_back({"blk.8.attn_k.weight", DType::f32, {32, 64}, std::vector<uint8_t>(32 * 64 * 4)});
            }),
            "(loaded)");
}

TEST_F(Gguf, ASynthGemma4OfFullLayersOnlyWithItsTokenizerRoundTripsAtQ8_0) {
  // Every layer full (heads of 32, one KV head: the model's head size and KV heads are the
  // sliding layers', which it has none of), per-layer parts of 16 values (shorter than
  // Q8_0's 32-value blocks: the table falls back to a format whose blocks divide them), and
  // synth's SentencePiece-style tokenizer, which a Gemma 4 GGUF needs.
  const fs::path hf = dir_ / "full";
  ASSERT_TRUE(write_synthetic_checkpoint(hf.string(), {.family = "gemma4", .hidden = 64, .layers = 3, .ffn = 64, .heads = 4,
                                                       .kv_heads = 2, .head_dim = 16, .vocab = 300, .context = 64,
                                                       .dtype = DType::f32, .seed = 3, .ple_dim = 16, .kv_shared = 1,
                                                       .sliding_period = 1})
                  .ok());
  auto model = load_model(hf.string());
  ASSERT_TRUE(model.ok()) << model.error().message;
  const fs::path path = dir_ / "full.gguf";
  ASSERT_TRUE(export_gguf(*model, path.string(),
                          {.scheme = *find_quant_scheme("q8_0"), .tokenizer_json = (hf / "tokenizer.json").string(), .splits = 1})
                  .ok());
  auto gguf = load_model(path.string());
  ASSERT_TRUE(gguf.ok()) << gguf.error().message;
  EXPECT_NE(gguf->ple_embed.dtype, DType::q8_0);
  EXPECT_EQ(gguf->layers[1].wq.dtype, DType::q8_0);
  for (size_t l = 0; l < 3; ++l) {
    EXPECT_EQ(gguf->config.layer(l).attention, AttentionKind::full) << l;
    EXPECT_EQ(gguf->config.layer(l).head_dim, 32u) << l;
    EXPECT_EQ(gguf->config.layer(l).kv_heads, 1u) << l;
    EXPECT_EQ(gguf->config.layer(l).kv_from, model->config.layer(l).kv_from) << l;
  }
  // The same greedy ids as the f32 model (Q8_0 weights on a 3-layer random model).
  const std::vector<int> prompt = {2, 40, 41, 42};
  EXPECT_EQ(test::local_greedy(*gguf, prompt, 4), test::local_greedy(*model, prompt, 4));
  // Both files tokenise alike (the GGUF adds Gemma 4's BOS, as llama.cpp does).
  auto from_hf = load_tokenizer_for(*model, hf.string(), std::nullopt);
  auto from_gguf = load_tokenizer_for(*gguf, path.string(), std::nullopt);
  ASSERT_TRUE(from_hf.ok() && from_gguf.ok());
  std::vector<int> expected = (*from_hf)->encode("Héllo, wörld of bytes");
  expected.insert(expected.begin(), 2);
  EXPECT_EQ((*from_gguf)->encode("Héllo, wörld of bytes"), expected);
}

TEST_F(Gguf, ATensorInAFormatLarqlDoesNotComputeOnIsNamed) {
  const fs::path hf = small_checkpoint(1, 2, 4);
  auto model = load_model(hf.string());
  ASSERT_TRUE(model.ok());
  const fs::path path = dir_ / "m.gguf";
  ASSERT_TRUE(export_gguf(*model, path.string(), {.scheme = *find_quant_scheme("f32"), .splits = 1}).ok());
  // Patch ffn_up's type id to Q2_K (10) in place: its record ends with type, then offset.
  auto bytes = read_bytes(path);
  const std::string name = "blk.0.ffn_up.weight";
  auto it = std::search(bytes.begin(), bytes.end(), name.begin(), name.end());
  ASSERT_NE(it, bytes.end());
  const size_t type_at = size_t(it - bytes.begin()) + name.size() + 4 + 2 * 8;
  const uint32_t q2k = 10;
  std::memcpy(&bytes[type_at], &q2k, 4);
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  auto loaded = load_model(path.string());
  ASSERT_FALSE(loaded.ok());
  EXPECT_NE(loaded.error().message.find("tensor 'blk.0.ffn_up.weight' is Q2_K"), std::string::npos) << loaded.error().message;
}

TEST_F(Gguf, Llama3RopeScalingBecomesRopeFreqsWithTheSameLogits) {
  const fs::path hf = small_checkpoint(2, 1, 9, 64);
  // A short original context, so that every branch of the scaling applies to head size 32.
  nlohmann::json config;
  std::ifstream(hf / "config.json") >> config;
  config["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0},
                            {"original_max_position_embeddings", 16}};
  std::ofstream(hf / "config.json") << config.dump();
  auto scaled = load_model(hf.string());
  ASSERT_TRUE(scaled.ok()) << scaled.error().message;
  ASSERT_TRUE(export_gguf(*scaled, (dir_ / "scaled.gguf").string(), {.scheme = *find_quant_scheme("f32"), .splits = 1}).ok());
  auto gguf = load_model((dir_ / "scaled.gguf").string());
  ASSERT_TRUE(gguf.ok()) << gguf.error().message;
  ASSERT_NE(gguf->rope_freqs.data, nullptr);
  EXPECT_EQ(gguf->rope_freqs.cols, 16u);

  auto logits_at = [](const Model& m, size_t positions) {
    ThreadPool pool(1);
    LocalFfn ffn(m, pool);
    Transformer t(m, ffn, pool);
    std::vector<int> tokens(positions);
    for (size_t i = 0; i < positions; ++i) tokens[i] = int(i * 37 % 256);
    std::vector<float> logits;
    EXPECT_TRUE(t.forward(tokens, 0, logits).ok());
    return logits;
  };
  const auto expected = logits_at(*scaled, 40), got = logits_at(*gguf, 40);
  float diff = 0, scale = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    diff = std::max(diff, std::fabs(got[i] - expected[i]));
    scale = std::max(scale, std::fabs(expected[i]));
  }
  EXPECT_LT(diff, 1e-4f * scale) << "rope_freqs should reproduce rope_scaling up to float rounding";
  // And the divisors matter: without them the logits are another model's.
  Model unscaled = *gguf;
  unscaled.rope_freqs = Matrix{};
  const auto plain = logits_at(unscaled, 40);
  float moved = 0;
  for (size_t i = 0; i < plain.size(); ++i) moved = std::max(moved, std::fabs(plain[i] - expected[i]));
  EXPECT_GT(moved, 100 * diff + 1e-6f);
}

}  // namespace
}  // namespace larql
