#include "net/range_split.h"

#include <algorithm>

namespace larql {

using namespace wire;

Result<WalkRequest> read_walk_request(std::string_view body, std::string_view content_type, size_t hidden) {
  const BodyType type = body_type_from_content_type(content_type);
  if (!type.binary && !type.json)
    return make_error(ErrorCode::unsupported_media_type,
                      "Content-Type '" + std::string(content_type) +
                          "' is not accepted; expected one of the application/x-larql-ffn types or application/json");
  WalkRequest request;
  request.encoding = type.binary;
  if (type.binary) {
    auto view = parse_request({reinterpret_cast<const uint8_t*>(body.data()), body.size()}, *type.binary, hidden);
    if (!view) return view.error();
    request.binary = std::move(*view);
  } else {
    auto json = parse_json_request(body, hidden);
    if (!json) return json.error();
    request.json = std::move(*json);
  }
  if (auto s = check_distinct_layers(request.layers()); !s) return s.error();
  return request;
}

Result<std::vector<RangePart>> split_by_range(const std::vector<uint32_t>& layers,
                                              const std::function<std::optional<LayerOwner>(uint32_t)>& owner,
                                              std::string_view covered) {
  std::vector<RangePart> parts;
  for (size_t i = 0; i < layers.size(); ++i) {
    const auto o = owner(layers[i]);
    if (!o)
      return make_error(ErrorCode::no_owning_shard, "layer " + std::to_string(layers[i]) +
                                                        " is not covered by any shard range (covered: " +
                                                        std::string(covered) + ")");
    auto part = std::find_if(parts.begin(), parts.end(), [&](const RangePart& p) { return p.owner.index == o->index; });
    if (part == parts.end()) part = parts.insert(parts.end(), RangePart{*o, {}, {}});
    part->layers.push_back(layers[i]);
    part->positions.push_back(i);
  }
  return parts;
}

std::string part_body(const WalkRequest& request, const RangePart& part) {
  std::string body;
  if (request.binary) {
    RequestHeader header = request.binary->header;
    header.layers = part.layers;
    write_request_with_values(header, request.binary->values, body);
  } else {
    body = encode_json_request(part.layers, request.json->seq_len, request.json->residual);
  }
  return body;
}

namespace {

// Whether a part's answer holds its layers in order, each for the request's positions
// (binary or JSON records: both have layer and seq_len), or why it is refused.
template <class Records>
Status check_records(const RangePart& part, const Records& records, uint32_t positions) {
  if (records.size() != part.layers.size())
    return make_error(ErrorCode::shard_unavailable, std::to_string(records.size()) + " layers where " +
                                                        std::to_string(part.layers.size()) + " were asked");
  for (size_t i = 0; i < records.size(); ++i) {
    if (records[i].layer != part.layers[i])
      return make_error(ErrorCode::shard_unavailable, "layer " + std::to_string(records[i].layer) + " where layer " +
                                                          std::to_string(part.layers[i]) + " was asked");
    if (records[i].seq_len != positions)
      return make_error(ErrorCode::shard_unavailable, std::to_string(records[i].seq_len) + " positions for layer " +
                                                          std::to_string(records[i].layer) + " where the request has " +
                                                          std::to_string(positions));
  }
  return Ok{};
}

Error refused(const RangePart& part, const PartAnswer& answer, const std::string& what) {
  return make_error(ErrorCode::shard_unavailable,
                    "shard " + answer.shard + " (layers " + part.owner.extent.str() + ") answered " + what);
}

Result<SplicedAnswer> splice_binary(const WalkRequest& request, const std::vector<RangePart>& parts,
                                    const std::vector<PartAnswer>& answers, size_t hidden) {
  struct Located {
    Encoding encoding;
    ResponseRecordView record;
  };
  std::vector<Located> records(request.layers().size());
  float latency = 0;
  std::optional<Encoding> first;
  bool same_encoding = true;
  for (size_t p = 0; p < parts.size(); ++p) {
    const auto encoding = body_type_from_content_type(answers[p].content_type).binary;
    if (!encoding) return refused(parts[p], answers[p], "with Content-Type '" + answers[p].content_type + "'");
    auto view = parse_response(as_bytes(answers[p].body), *encoding, hidden);
    if (!view) return refused(parts[p], answers[p], "a malformed response: " + view.error().message);
    if (auto s = check_records(parts[p], view->records, request.positions()); !s)
      return refused(parts[p], answers[p], s.error().message);
    for (size_t i = 0; i < view->records.size(); ++i) records[parts[p].positions[i]] = {*encoding, view->records[i]};
    latency = std::max(latency, view->latency_ms);
    if (first && *first != *encoding) same_encoding = false;
    first = first.value_or(*encoding);
  }
  SplicedAnswer out;
  if (same_encoding) {
    std::vector<ResponseRecordView> spliced;
    spliced.reserve(records.size());
    for (const auto& r : records) spliced.push_back(r.record);
    write_batch_response(spliced, hidden, latency, out.body);
    out.content_type = std::string(content_type(*first));
    return out;
  }
  // Some part fell back to f32: decode everything exactly and send the whole answer as f32.
  const uint32_t positions = request.positions();
  std::vector<std::vector<float>> values(records.size());
  std::vector<ResponseRecord> decoded;
  for (size_t i = 0; i < records.size(); ++i) {
    values[i].resize(size_t(positions) * hidden);
    if (auto s = decode_values(records[i].encoding, records[i].record.values, positions, hidden, values[i]); !s)
      return make_error(ErrorCode::shard_unavailable, "a shard's values for layer " + std::to_string(records[i].record.layer) +
                                                          " were rejected: " + s.error().message);
    decoded.push_back({records[i].record.layer, values[i]});
  }
  if (auto s = encode_response(Encoding::f32, decoded, positions, hidden, latency, out.body); !s) return s.error();
  out.content_type = std::string(content_type(Encoding::f32));
  out.reencoded_f32 = true;
  return out;
}

Result<SplicedAnswer> splice_json(const WalkRequest& request, const std::vector<RangePart>& parts,
                                  const std::vector<PartAnswer>& answers, size_t hidden) {
  std::vector<JsonRecord> records(request.layers().size());
  float latency = 0;
  for (size_t p = 0; p < parts.size(); ++p) {
    auto parsed = parse_json_response(answers[p].body, hidden);
    if (!parsed) return refused(parts[p], answers[p], "malformed JSON: " + parsed.error().message);
    if (auto s = check_records(parts[p], parsed->records, request.positions()); !s)
      return refused(parts[p], answers[p], s.error().message);
    for (size_t i = 0; i < parsed->records.size(); ++i) records[parts[p].positions[i]] = std::move(parsed->records[i]);
    latency = std::max(latency, parsed->latency_ms);
  }
  std::vector<ResponseRecord> out_records;
  for (const auto& r : records) out_records.push_back({r.layer, r.output});
  auto text = encode_json_response(out_records, request.positions(), latency);
  if (!text) return text.error();
  return SplicedAnswer{std::string(kContentTypeJson), std::move(*text)};
}

}  // namespace

Result<SplicedAnswer> splice_answers(const WalkRequest& request, const std::vector<RangePart>& parts,
                                     const std::vector<PartAnswer>& answers, size_t hidden) {
  if (answers.size() != parts.size())
    return make_error(ErrorCode::internal, std::to_string(answers.size()) + " answers for " +
                                               std::to_string(parts.size()) + " parts");
  return request.encoding ? splice_binary(request, parts, answers, hidden) : splice_json(request, parts, answers, hidden);
}

}  // namespace larql
