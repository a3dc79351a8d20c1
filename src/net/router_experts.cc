// The router's expert ranges (PROTOCOL §12): /v1/walk-experts forwarded whole to the one
// range that owns every assigned expert, else split by range, each part asking its shards
// for per-expert rows in f32 (or f16, --shard-wire), and answered from here: weighted sums
// in the one summation order (bit-identical for any split), or the parts' rows spliced
// into assignment order (re-encoded as f32 when the parts answered in different encodings).
#include <algorithm>
#include <future>
#include <set>

#include "net/router_map.h"
#include "wire/accept.h"
#include "wire/expert_codec.h"

namespace larql {

using namespace wire;

Status Router::check_expert_coverage(const Map& map) const {
  size_t experts;
  {
    std::lock_guard lock(map_mutex_);
    experts = experts_;
  }
  if (experts == 0) return Ok{};  // no shard has said yet (or a dense model)
  std::set<uint32_t> starts;  // the first layer of every part: coverage changes only there
  for (const auto& e : map.entries) {
    starts.insert(e.part.range.first);
    if (e.part.range.last != UINT32_MAX) starts.insert(e.part.range.last + 1);
  }
  for (uint32_t layer : starts) {
    const std::vector<size_t> owners = map.expert_owners(layer);
    if (owners.empty()) continue;
    std::vector<LayerRange> ranges;
    for (size_t i : owners) {
      const ShardRange& p = map.entries[i].part;
      ranges.push_back(p.part == ShardPart::all ? LayerRange{0, uint32_t(experts - 1)} : p.experts);
    }
    if (const auto gap = first_uncovered(ranges, uint32_t(experts)))
      return make_error(ErrorCode::invalid_argument, "--shards leaves experts " + gap->str() + " of layer " +
                                                         std::to_string(layer) + " without a shard");
  }
  return Ok{};
}

HttpReply Router::walk_experts(const std::string& body, const std::string& content_type, const std::string& accept,
                               const std::string& authorization, Deadline deadline) {
  HttpReply reply = answer([&] { return walk_experts_outcome(body, content_type, accept, authorization, deadline); });
  count_bytes(body, content_type, reply);
  return reply;
}

Router::WalkOutcome Router::walk_experts_outcome(const std::string& body, const std::string& content_type,
                                                 const std::string& accept, const std::string& authorization,
                                                 Deadline deadline) {
  auto fail = [](Error e, int retry_after_s = 0) { return WalkOutcome{std::nullopt, std::move(e), retry_after_s}; };
  const auto map = current_map();
  size_t hidden, experts, layers;
  {
    std::lock_guard lock(map_mutex_);
    hidden = hidden_, experts = experts_, layers = num_layers_;
  }
  const BodyType type = body_type_from_content_type(content_type);
  if (type.json)
    return fail(make_error(ErrorCode::unsupported_media_type, "/v1/walk-experts has no JSON form (PROTOCOL §12); send a binary body"));
  if (!type.binary)
    return fail(make_error(ErrorCode::unsupported_media_type, "Content-Type '" + content_type + "' is not a binary FFN encoding"));
  if (hidden == 0) return fail(make_error(ErrorCode::shard_unavailable, "no shard has answered yet"));
  const Encoding encoding = *type.binary;
  auto view = parse_expert_request(as_bytes(body), encoding, hidden);
  if (!view) return fail(view.error());
  if (layers && view->layer >= layers)
    return fail(make_error(ErrorCode::layer_out_of_range, "layer " + std::to_string(view->layer) + " is out of range: the model has " +
                                                              std::to_string(layers) + " layers"));
  const std::vector<size_t> owners = map->expert_owners(view->layer);
  if (owners.empty())
    return fail(make_error(ErrorCode::no_owning_shard, "no shard serves the experts of layer " + std::to_string(view->layer) +
                                                           "; mapped: " + map->covered()));
  auto ids_of = [&](size_t entry) {
    const ShardRange& p = map->entries[entry].part;
    return p.part == ShardPart::all ? LayerRange{0, UINT32_MAX} : p.experts;
  };
  auto part_of = [&](size_t entry) { return RangePart{LayerOwner{entry, map->entries[entry].part.range}, {view->layer}, {0}}; };
  // One range owns every assigned expert: the body goes through byte for byte (the shard
  // checks the rest).
  for (size_t entry : owners) {
    const LayerRange ids = ids_of(entry);
    if (std::all_of(view->assignments.begin(), view->assignments.end(), [&](const auto& a) { return ids.contains(a.expert); }))
      return forward(*map, part_of(entry), "/v1/walk-experts", body, content_type, accept, authorization, deadline);
  }
  if (auto s = check_assignments(view->assignments, view->rows, uint32_t(experts ? experts : UINT32_MAX)); !s) return fail(s.error());
  std::vector<float> x(size_t{view->rows} * hidden);
  if (auto s = decode_values(encoding, view->values, view->rows, hidden, x); !s) return fail(s.error());

  // The parts: each range's rows (renumbered) and assignments, asking for f32 per-expert rows.
  struct Part {
    size_t entry;
    ExpertPart share;
    std::string body, content_type;
  };
  std::vector<Part> parts;
  for (size_t entry : owners) {
    const LayerRange ids = ids_of(entry);
    ExpertPart share = take_expert_range(view->assignments, ids.first, ids.last);
    if (share.assignments.empty()) continue;
    std::vector<float> rows(share.rows.size() * hidden);
    for (size_t i = 0; i < share.rows.size(); ++i)
      std::copy_n(x.data() + size_t{share.rows[i]} * hidden, hidden, rows.data() + i * hidden);
    std::string part_body;
    auto enc = encode_expert_request(options_.shard_wire, view->layer, uint32_t(share.rows.size()), true, share.assignments,
                                     hidden, rows, part_body);
    if (!enc) return fail(enc.error());
    parts.push_back({entry, std::move(share), std::move(part_body), std::string(wire::content_type(enc->encoding))});
  }
  size_t covered = 0;
  for (const Part& p : parts) covered += p.share.sources.size();
  if (covered != view->assignments.size()) {
    for (const ExpertAssignment& a : view->assignments)
      if (std::none_of(owners.begin(), owners.end(), [&](size_t e) { return ids_of(e).contains(a.expert); }))
        return fail(make_error(ErrorCode::no_owning_shard, "no shard serves expert " + std::to_string(a.expert) + " of layer " +
                                                               std::to_string(view->layer) + "; mapped: " + map->covered()));
  }
  const std::string asked(wire::content_type(options_.shard_wire));
  std::vector<std::future<WalkOutcome>> pending;
  for (const Part& p : parts)
    pending.push_back(std::async(std::launch::async, [&, &p = p] {
      return forward(*map, part_of(p.entry), "/v1/walk-experts", p.body, p.content_type, asked, authorization, deadline);
    }));
  std::vector<WalkOutcome> outcomes;
  for (auto& f : pending) outcomes.push_back(f.get());

  // Every part's rows back into assignment order: their bytes, spliced, while every part
  // answered in one encoding; and as floats.
  const size_t n = view->assignments.size();
  std::vector<float> expert_rows(n * hidden);
  std::string spliced;
  std::optional<Encoding> answered_in;
  bool one_encoding = true;
  std::string shards;
  float latency_ms = 0;
  for (size_t p = 0; p < parts.size(); ++p) {
    WalkOutcome& o = outcomes[p];
    if (!o.answer) return std::move(o);
    const std::string part_name = map->entries[parts[p].entry].part.str();
    if (o.answer->status != 200) {
      name_shard_in_error(o.answer->body, o.answer->shards, part_name);
      return std::move(o);
    }
    const auto answered = body_type_from_content_type(o.answer->content_type).binary;
    const size_t m = parts[p].share.sources.size();
    auto rows = answered ? parse_expert_rows_response(as_bytes(o.answer->body), *answered, hidden)
                         : Result<ExpertRowsView>(make_error(ErrorCode::shard_unavailable, "not a binary answer"));
    std::vector<float> values(m * hidden);
    Status decoded = rows ? decode_values(*answered, rows->values, m, hidden, values) : Status(rows.error());
    if (!rows || rows->n != m || rows->layer != view->layer || !decoded)
      return fail(make_error(ErrorCode::shard_unavailable,
                             "shard " + o.answer->shards + " (layers " + part_name +
                                 ") did not answer the per-expert rows it was asked for" +
                                 (!rows ? ": " + rows.error().message : !decoded ? ": " + decoded.error().message : "")));
    if (!answered_in) {
      answered_in = *answered;
      spliced.resize(n * *values_byte_size(*answered, 1, hidden));
    }
    one_encoding = one_encoding && *answered == *answered_in;
    const size_t row_bytes = *values_byte_size(*answered, 1, hidden);
    latency_ms = std::max(latency_ms, rows->latency_ms);
    for (size_t i = 0; i < m; ++i) {
      const size_t at = parts[p].share.sources[i];
      std::copy_n(values.data() + i * hidden, hidden, expert_rows.data() + at * hidden);
      if (one_encoding) std::copy_n(rows->values.data() + i * row_bytes, row_bytes, spliced.data() + at * row_bytes);
    }
    shards += (shards.empty() ? "" : ",") + o.answer->shards;
  }
  Answer answer{200, {}, {}, shards};
  if (view->expert_rows()) {
    if (one_encoding) {  // the parts' bytes, untouched
      write_expert_rows_response(view->layer, uint32_t(n), latency_ms, as_bytes(spliced), answer.body);
      answer.content_type = std::string(wire::content_type(*answered_in));
      return {std::move(answer), {}, 0};
    }
    auto enc = encode_expert_rows_response(Encoding::f32, view->layer, uint32_t(n), hidden, expert_rows, latency_ms, answer.body);
    if (!enc) return fail(enc.error());
    answer.content_type = std::string(wire::content_type(Encoding::f32));
    answer.reencoded_f32 = true;
    return {std::move(answer), {}, 0};
  }
  std::vector<float> sums(size_t{view->rows} * hidden);
  sum_expert_rows(view->assignments, expert_rows.data(), hidden, sums.data());
  EncodingSet offered{Encoding::f32, Encoding::f16, Encoding::i8};
  if (encoding_fits_hidden(Encoding::q8, hidden)) offered.insert(Encoding::q8);
  const ResponseRecord record{view->layer, sums};
  auto enc = encode_response(negotiate_response_encoding(accept, offered), {&record, 1}, view->rows, hidden, latency_ms, answer.body);
  if (!enc) return fail(enc.error());
  answer.content_type = std::string(wire::content_type(enc->encoding));
  return {std::move(answer), {}, 0};
}

}  // namespace larql
