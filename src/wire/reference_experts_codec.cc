#include "wire/reference_experts_codec.h"

#include <cmath>
#include <cstring>

#include "base/byte_io.h"
#include "base/f16.h"

namespace larql::wire {
namespace {

constexpr size_t kHeader = 12;  // layer, hidden, K
std::string str(size_t v) { return std::to_string(v); }

}  // namespace

Result<ReferenceExpertRequest> parse_reference_expert_request(Bytes body, bool f16, size_t hidden) {
  const size_t n = body.size(), value_bytes = f16 ? 2 : 4;
  if (n < kHeader)
    return make_error(ErrorCode::truncated, "expert request ends inside its header: " + str(n) +
                                                " bytes, expected at least 12 (layer, hidden, K)");
  const uint8_t* p = body.data();
  ReferenceExpertRequest r;
  r.layer = load_u32(p);
  const uint32_t their_hidden = load_u32(p + 4), k = load_u32(p + 8);
  if (their_hidden != hidden)
    return make_error(ErrorCode::bad_length, "hidden is " + str(their_hidden) + "; this model's is " + str(hidden));
  // hidden and K are at most 2^32 - 1: their byte counts fit a 64-bit size_t.
  const size_t need = kHeader + size_t{their_hidden} * value_bytes + size_t{k} * 8;
  if (n < need)
    return make_error(ErrorCode::truncated, "expert request has " + str(n) + " bytes; hidden " + str(their_hidden) + " and K " +
                                                str(k) + " need " + str(need));
  if (n > need) return make_error(ErrorCode::bad_length, "expert request has " + str(n - need) + " trailing bytes");
  r.residual.resize(hidden);
  for (size_t i = 0; i < hidden; ++i) {
    const uint8_t* v = p + kHeader + i * value_bytes;
    r.residual[i] = f16 ? f16_to_f32(uint16_t(v[0] | v[1] << 8)) : load_f32(v);
    if (!std::isfinite(r.residual[i]))
      return make_error(ErrorCode::non_finite_input, "residual index " + str(i) + " is not finite");
  }
  const uint8_t* e = p + kHeader + hidden * value_bytes;
  for (size_t i = 0; i < k; ++i) {
    r.experts.push_back({load_u32(e + 8 * i), load_f32(e + 8 * i + 4)});
    if (!std::isfinite(r.experts.back().weight))
      return make_error(ErrorCode::non_finite_input, "the weight of expert " + str(r.experts.back().expert) + " is not finite");
  }
  return r;
}

Result<std::string> encode_reference_expert_response(std::span<const float> values, float latency_ms, bool f16) {
  std::string out(8 + values.size() * (f16 ? 2 : 4), '\0');
  auto* p = reinterpret_cast<uint8_t*>(out.data());
  store_u32(p, uint32_t(values.size()));
  store_f32(p + 4, latency_ms);
  for (size_t i = 0; i < values.size(); ++i) {
    if (!std::isfinite(values[i]) || (f16 && std::fabs(values[i]) > kF16Max))
      return make_error(ErrorCode::non_finite_output, "expert output index " + str(i) + " is " + std::to_string(values[i]) +
                                                          (f16 ? ", not a finite f16" : ", not finite"));
    if (f16) {
      const uint16_t h = f32_to_f16(values[i]);
      p[8 + 2 * i] = uint8_t(h), p[9 + 2 * i] = uint8_t(h >> 8);
    } else {
      store_f32(p + 8 + 4 * i, values[i]);
    }
  }
  return out;
}

std::string encode_reference_expert_request(uint32_t layer, std::span<const float> residual,
                                            std::span<const ReferenceExpert> experts, bool f16) {
  const size_t value_bytes = f16 ? 2 : 4;
  std::string out(kHeader + residual.size() * value_bytes + experts.size() * 8, '\0');
  auto* p = reinterpret_cast<uint8_t*>(out.data());
  store_u32(p, layer);
  store_u32(p + 4, uint32_t(residual.size()));
  store_u32(p + 8, uint32_t(experts.size()));
  for (size_t i = 0; i < residual.size(); ++i) {
    uint8_t* v = p + kHeader + i * value_bytes;
    if (f16) {
      const uint16_t h = f32_to_f16(residual[i]);
      v[0] = uint8_t(h), v[1] = uint8_t(h >> 8);
    } else {
      store_f32(v, residual[i]);
    }
  }
  uint8_t* e = p + kHeader + residual.size() * value_bytes;
  for (size_t i = 0; i < experts.size(); ++i) store_u32(e + 8 * i, experts[i].expert), store_f32(e + 8 * i + 4, experts[i].weight);
  return out;
}

}  // namespace larql::wire
