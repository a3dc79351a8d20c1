#include "wire/json_codec.h"

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

namespace larql::wire {
namespace {

using nlohmann::json;

Error invalid(std::string message) { return make_error(ErrorCode::invalid_json, std::move(message)); }

Result<json> parse_object(std::string_view body) {
  json doc = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return invalid("body is not valid JSON");
  if (!doc.is_object()) return invalid("body must be a JSON object");
  return doc;
}

Result<uint32_t> read_u32(const json& v, const std::string& what) {
  if (!v.is_number_unsigned() || v.get<uint64_t>() > std::numeric_limits<uint32_t>::max())
    return invalid(what + " must be a non-negative integer below 2^32, got " + v.dump());
  return static_cast<uint32_t>(v.get<uint64_t>());
}

// Reads a JSON number array of exactly `count` finite f32 values.
Result<std::vector<float>> read_values(const json& doc, const char* key, size_t seq_len, size_t hidden) {
  auto it = doc.find(key);
  if (it == doc.end() || !it->is_array()) return invalid(std::string("missing '") + key + "' array of numbers");
  const size_t count = seq_len * hidden;
  if (it->size() != count)
    return make_error(ErrorCode::bad_length, std::string(key) + " has " + std::to_string(it->size()) +
                                                 " values, expected " + std::to_string(count) + " (seq_len=" +
                                                 std::to_string(seq_len) + " × hidden=" + std::to_string(hidden) + ")");
  std::vector<float> values(count);
  for (size_t i = 0; i < count; ++i) {
    const json& v = (*it)[i];
    if (!v.is_number()) return invalid(std::string(key) + "[" + std::to_string(i) + "] is not a number");
    const float f = static_cast<float>(v.get<double>());
    if (!std::isfinite(f))
      return make_error(ErrorCode::non_finite_input, std::string(key) + "[" + std::to_string(i) + "] = " + v.dump() +
                                                         " is not a finite f32 value");
    values[i] = f;
  }
  return values;
}

Result<uint32_t> read_seq_len(const json& doc, bool required) {
  auto it = doc.find("seq_len");
  if (it == doc.end()) {
    if (required) return invalid("missing 'seq_len'");
    return uint32_t{1};
  }
  auto s = read_u32(*it, "seq_len");
  if (!s) return s.error();
  if (*s == 0) return make_error(ErrorCode::bad_seq_len, "seq_len is 0; expected at least 1");
  return *s;
}

}  // namespace

Result<JsonRequest> parse_json_request(std::string_view body, size_t hidden) {
  auto doc = parse_object(body);
  if (!doc) return doc.error();
  JsonRequest req;
  if (auto it = doc->find("layers"); it != doc->end()) {
    if (!it->is_array()) return invalid("'layers' must be an array of layer numbers");
    if (it->empty() || it->size() > kMaxBatchLayers)
      return make_error(ErrorCode::bad_layer_count, "'layers' names " + std::to_string(it->size()) +
                                                        " layers; expected 1 to " + std::to_string(kMaxBatchLayers));
    for (const auto& v : *it) {
      auto layer = read_u32(v, "each of 'layers'");
      if (!layer) return layer.error();
      req.layers.push_back(*layer);
    }
  } else if (auto it1 = doc->find("layer"); it1 != doc->end()) {
    auto layer = read_u32(*it1, "'layer'");
    if (!layer) return layer.error();
    req.layers.push_back(*layer);
  } else {
    return invalid("missing 'layer' (a number) or 'layers' (an array)");
  }
  auto seq_len = read_seq_len(*doc, false);
  if (!seq_len) return seq_len.error();
  req.seq_len = *seq_len;
  auto full = doc->find("full_output");
  if (full == doc->end() || !full->is_boolean() || !full->get<bool>())
    return make_error(ErrorCode::full_output_required,
                      "'full_output' must be true: this server only returns full FFN outputs");
  if (size_t count; __builtin_mul_overflow(size_t{req.seq_len}, hidden, &count))
    return make_error(ErrorCode::bad_seq_len, "seq_len × hidden overflows");
  auto values = read_values(*doc, "residual", req.seq_len, hidden);
  if (!values) return values.error();
  req.residual = std::move(*values);
  return req;
}

std::string encode_json_request(std::span<const uint32_t> layers, uint32_t seq_len, std::span<const float> residual) {
  json doc;
  if (layers.size() == 1)
    doc["layer"] = layers[0];
  else
    doc["layers"] = std::vector<uint32_t>(layers.begin(), layers.end());
  doc["seq_len"] = seq_len;
  doc["full_output"] = true;
  doc["residual"] = std::vector<float>(residual.begin(), residual.end());
  return doc.dump();
}

Result<std::string> encode_json_response(std::span<const ResponseRecord> records, uint32_t seq_len,
                                         float latency_ms) {
  auto record_json = [&](const ResponseRecord& r) -> Result<json> {
    for (float v : r.values)
      if (!std::isfinite(v))
        return make_error(ErrorCode::non_finite_output,
                          "FFN output for layer " + std::to_string(r.layer) + " holds a non-finite value");
    return json{{"layer", r.layer}, {"output", std::vector<float>(r.values.begin(), r.values.end())}, {"seq_len", seq_len}};
  };
  json doc;
  if (records.size() == 1) {
    auto one = record_json(records[0]);
    if (!one) return one.error();
    doc = std::move(*one);
  } else {
    doc["results"] = json::array();
    for (const auto& r : records) {
      auto one = record_json(r);
      if (!one) return one.error();
      doc["results"].push_back(std::move(*one));
    }
    doc["seq_len"] = seq_len;
  }
  doc["latency_ms"] = latency_ms;
  return doc.dump();
}

Result<JsonResponse> parse_json_response(std::string_view body, size_t hidden) {
  auto doc = parse_object(body);
  if (!doc) return doc.error();
  JsonResponse out;
  auto latency = doc->find("latency_ms");
  if (latency == doc->end() || !latency->is_number()) return invalid("missing 'latency_ms' number");
  out.latency_ms = static_cast<float>(latency->get<double>());
  if (!std::isfinite(out.latency_ms))  // as the binary parser: a router would pass it on as null
    return make_error(ErrorCode::non_finite_input, "response latency_ms " + latency->dump() + " is not a finite f32");

  auto read_record = [&](const json& r) -> Result<JsonRecord> {
    if (!r.is_object()) return invalid("each result must be an object");
    auto layer_it = r.find("layer");
    if (layer_it == r.end()) return invalid("result without 'layer'");
    auto layer = read_u32(*layer_it, "'layer'");
    if (!layer) return layer.error();
    auto seq_len = read_seq_len(r, true);
    if (!seq_len) return seq_len.error();
    if (size_t count; __builtin_mul_overflow(size_t{*seq_len}, hidden, &count))
      return make_error(ErrorCode::bad_seq_len, "seq_len × hidden overflows");
    auto values = read_values(r, "output", *seq_len, hidden);
    if (!values) return values.error();
    return JsonRecord{*layer, *seq_len, std::move(*values)};
  };

  if (auto results = doc->find("results"); results != doc->end()) {
    if (!results->is_array()) return invalid("'results' must be an array");
    for (const auto& r : *results) {
      auto rec = read_record(r);
      if (!rec) return rec.error();
      out.records.push_back(std::move(*rec));
    }
  } else {
    auto rec = read_record(*doc);
    if (!rec) return rec.error();
    out.records.push_back(std::move(*rec));
  }
  return out;
}

}  // namespace larql::wire
