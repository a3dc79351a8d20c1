// Round trips through full messages for random shapes: f32 exact, f16 equal to the scalar
// round-to-nearest-even conversion bit for bit, i8 within scale/2 plus one ulp per value.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "base/f16.h"
#include "support/random_values.h"
#include "wire/codec.h"

namespace larql::wire {
namespace {

constexpr size_t kHiddenSizes[] = {1, 2, 3, 64, 2560, 4096, 5120};

// Decodes the request's values back to floats.
std::vector<float> request_round_trip(Encoding e, const std::vector<uint32_t>& layers, size_t seq_len, size_t hidden,
                                      const std::vector<float>& values, EncodeOutcome* outcome = nullptr) {
  std::string msg;
  auto enc = encode_request(e, {.layers = layers, .seq_len = static_cast<uint32_t>(seq_len)}, hidden, values, msg);
  EXPECT_TRUE(enc.ok());
  if (outcome) *outcome = *enc;
  auto view = parse_request(as_bytes(msg), enc->encoding, hidden);
  EXPECT_TRUE(view.ok()) << view.error().message;
  EXPECT_EQ(view->header.layers, layers);
  std::vector<float> out(seq_len * hidden);
  auto s = decode_values(enc->encoding, view->values, seq_len, hidden, out);
  EXPECT_TRUE(s.ok()) << s.error().message;
  return out;
}

// i8 error bound of PROTOCOL §5: |x - x̂| ≤ scale/2 + one ulp of the value.
void expect_within_i8_bound(const std::vector<float>& in, const std::vector<float>& out, size_t hidden) {
  for (size_t r = 0; r < in.size() / hidden; ++r) {
    float max_abs = 0;
    for (size_t i = 0; i < hidden; ++i) max_abs = std::fmax(max_abs, std::fabs(in[r * hidden + i]));
    const double scale = max_abs == 0 ? 1.0 : double(max_abs / 127.0f);
    for (size_t i = 0; i < hidden; ++i) {
      const float x = in[r * hidden + i], y = out[r * hidden + i];
      const double ulp = std::nextafter(std::fabs(x), INFINITY) - std::fabs(x);
      ASSERT_LE(std::fabs(double(x) - double(y)), scale / 2 + ulp) << "row " << r << " index " << i;
    }
  }
}

TEST(CodecRoundTrip, RandomShapesAllEncodings) {
  std::mt19937 rng(1234);
  std::uniform_int_distribution<size_t> seq(1, 512);
  for (size_t hidden : kHiddenSizes) {
    // Large hidden sizes get fewer draws to keep the test fast; every size gets S=1 and S=512.
    const int draws = hidden >= 2560 ? 3 : 12;
    for (int d = 0; d < draws; ++d) {
      const size_t seq_len = d == 0 ? 1 : (d == 1 ? 512 : seq(rng));
      SCOPED_TRACE("hidden=" + std::to_string(hidden) + " seq_len=" + std::to_string(seq_len));
      const auto values = test::random_rows(seq_len, hidden, static_cast<uint32_t>(hidden * 1000 + d));
      const std::vector<uint32_t> layers = d % 2 ? std::vector<uint32_t>{2, 9, 4} : std::vector<uint32_t>{7};

      EXPECT_EQ(request_round_trip(Encoding::f32, layers, seq_len, hidden, values), values);

      auto f16 = request_round_trip(Encoding::f16, layers, seq_len, hidden, values);
      for (size_t i = 0; i < values.size(); ++i)
        ASSERT_EQ(std::bit_cast<uint32_t>(f16[i]), std::bit_cast<uint32_t>(f16_to_f32(f32_to_f16(values[i]))))
            << "index " << i;

      auto i8 = request_round_trip(Encoding::i8, layers, seq_len, hidden, values);
      expect_within_i8_bound(values, i8, hidden);
    }
  }
}

TEST(CodecRoundTrip, BatchResponseKeepsRecordOrderAndValues) {
  const size_t hidden = 64, seq_len = 5;
  std::vector<std::vector<float>> outputs;
  std::vector<ResponseRecord> records;
  for (uint32_t layer : {9u, 1u, 5u}) outputs.push_back(test::random_rows(seq_len, hidden, layer));
  for (size_t i = 0; i < outputs.size(); ++i) records.push_back({uint32_t(9 - 4 * i), outputs[i]});
  for (Encoding e : {Encoding::f32, Encoding::f16, Encoding::i8}) {
    SCOPED_TRACE(encoding_name(e));
    std::string msg;
    auto enc = encode_response(e, records, seq_len, hidden, 0.25f, msg);
    ASSERT_TRUE(enc.ok());
    EXPECT_EQ(enc->encoding, e);
    auto view = parse_response(as_bytes(msg), e, hidden);
    ASSERT_TRUE(view.ok()) << view.error().message;
    ASSERT_EQ(view->records.size(), records.size());
    for (size_t i = 0; i < records.size(); ++i) {
      EXPECT_EQ(view->records[i].layer, records[i].layer);
      std::vector<float> out(seq_len * hidden);
      ASSERT_TRUE(decode_values(e, view->records[i].values, seq_len, hidden, out).ok());
      if (e == Encoding::f32) {
        EXPECT_EQ(out, outputs[i]);
      } else if (e == Encoding::i8) {
        expect_within_i8_bound(outputs[i], out, hidden);
      }
    }
  }
}

TEST(CodecRoundTrip, F16FallsBackToF32WhenAValueOverflows) {
  std::vector<float> values = test::random_rows(3, 64, 7, 10.0f);
  values[130] = 65520.0f;  // rounds to f16 infinity
  EncodeOutcome outcome{};
  auto out = request_round_trip(Encoding::f16, {0}, 3, 64, values, &outcome);
  EXPECT_EQ(outcome.encoding, Encoding::f32);
  EXPECT_TRUE(outcome.fell_back);
  EXPECT_EQ(out, values);  // exact, since it went as f32

  values[130] = 65519.0f;  // still rounds to 65504: no fallback
  auto kept = request_round_trip(Encoding::f16, {0}, 3, 64, values, &outcome);
  EXPECT_EQ(outcome.encoding, Encoding::f16);
  EXPECT_FALSE(outcome.fell_back);
  EXPECT_EQ(kept[130], 65504.0f);
}

TEST(CodecRoundTrip, ResponseFallbackCoversTheWholeMessage) {
  std::vector<float> a = test::random_rows(2, 8, 1, 1.0f), b = test::random_rows(2, 8, 2, 1.0f);
  b[3] = -1e6f;  // second record does not fit f16
  const ResponseRecord recs[] = {{0, a}, {1, b}};
  std::string msg;
  auto enc = encode_response(Encoding::f16, recs, 2, 8, 1.0f, msg);
  ASSERT_TRUE(enc.ok());
  EXPECT_EQ(enc->encoding, Encoding::f32);
  EXPECT_TRUE(enc->fell_back);
  auto view = parse_response(as_bytes(msg), Encoding::f32, 8);
  ASSERT_TRUE(view.ok()) << view.error().message;
  std::vector<float> out(16);
  ASSERT_TRUE(decode_values(Encoding::f32, view->records[1].values, 2, 8, out).ok());
  EXPECT_EQ(out, b);
}

TEST(CodecRoundTrip, NonFiniteValuesAreNeverEncoded) {
  for (float bad : {NAN, INFINITY, -INFINITY}) {
    std::vector<float> values(16, 1.0f);
    values[11] = bad;
    for (Encoding e : {Encoding::f32, Encoding::f16, Encoding::i8}) {
      std::string msg;
      auto req = encode_request(e, {.layers = {1}, .seq_len = 2}, 8, values, msg);
      ASSERT_FALSE(req.ok());
      EXPECT_EQ(req.error().code, ErrorCode::non_finite_input);
      EXPECT_NE(req.error().message.find("position 1, index 3"), std::string::npos) << req.error().message;
      const ResponseRecord rec{4, values};
      auto res = encode_response(e, {&rec, 1}, 2, 8, 1.0f, msg);
      ASSERT_FALSE(res.ok());
      EXPECT_EQ(res.error().code, ErrorCode::non_finite_output);
      EXPECT_NE(res.error().message.find("layer 4"), std::string::npos) << res.error().message;
    }
  }
}

}  // namespace
}  // namespace larql::wire
