#include "net/ffn_service.h"

#include <algorithm>

#include "model/fingerprint.h"
#include "wire/accept.h"
#include "wire/codec.h"
#include "kernels/ops.h"
#include "wire/json_codec.h"
#include "wire/reference_experts_codec.h"

namespace larql {

using nlohmann::json;
using namespace wire;

FfnService::FfnService(const Model& model, FfnBackend& compute, FfnServiceOptions options)
    : model_(model), compute_(compute), options_(options) {
  options_.encodings.insert(Encoding::f32);
  if (!encoding_fits_hidden(Encoding::q8, model_.config.hidden)) options_.encodings.erase(Encoding::q8);
  const MoeSpec& moe = model_.config.moe;
  if (moe.experts) options_.experts.last = std::min<uint32_t>(options_.experts.last, uint32_t(moe.expert_ids() - 1));
  for (uint32_t l = options_.layers.first; l <= options_.layers.last; ++l) {
    fingerprints_.push_back(layer_fingerprint(model_, l));
    expert_fingerprints_.push_back(model_.config.layer(l).sparse
                                       ? expert_fingerprint(model_, l, options_.experts.first, options_.experts.last)
                                       : std::string());
  }
}

bool FfnService::owns_all_experts() const {
  return options_.experts.first == 0 && options_.experts.last + 1 >= model_.config.moe.expert_ids();
}

HttpReply FfnService::fail(const Error& e) {
  metrics_.count_error(e.code);
  return error_reply(e);
}

Status FfnService::check_body_size(size_t bytes) const {
  if (bytes > options_.max_body_bytes)
    return make_error(ErrorCode::body_too_large, "body has " + std::to_string(bytes) + " bytes; the limit is " +
                                                     std::to_string(options_.max_body_bytes));
  return Ok{};
}

Status FfnService::check_layer(uint32_t l) const {
  if (l >= model_.config.layers)
    return make_error(ErrorCode::layer_out_of_range, "layer " + std::to_string(l) + " is out of range: the model has " +
                                                         std::to_string(model_.config.layers) + " layers (0-" +
                                                         std::to_string(model_.config.layers - 1) + ")");
  if (!options_.layers.contains(l))
    return make_error(ErrorCode::layer_not_owned, "layer " + std::to_string(l) + " is not served here: this shard owns layers " +
                                                      options_.layers.str());
  return Ok{};
}

Status FfnService::check_work(const std::vector<uint32_t>& layers, size_t rows) const {
  if (auto s = check_distinct_layers(layers); !s) return s;
  if (layers.size() * rows > options_.max_work)
    return make_error(ErrorCode::work_too_large, std::to_string(rows) + " positions × " + std::to_string(layers.size()) +
                                                     " layers = " + std::to_string(rows * layers.size()) +
                                                     " row-layers is above this server's limit of " +
                                                     std::to_string(options_.max_work) + " (--max-work); split the request");
  for (uint32_t l : layers) {
    if (auto s = check_layer(l); !s) return s;
    // Routing here needs every expert of the layer (Gemma 4's walk-ffn is its dense MLP only).
    if (model_.config.layer(l).sparse && !model_.config.moe.beside_dense && !owns_all_experts())
      return make_error(ErrorCode::expert_not_owned, "layer " + std::to_string(l) + "'s experts are split over shards (this one owns experts " +
                                                         options_.experts.str() + "): route on the client and send /v1/walk-experts");
  }
  return Ok{};
}

Result<double> FfnService::compute_dense(const std::vector<uint32_t>& layers, const std::vector<float>& x, size_t rows,
                                         std::vector<std::vector<float>>& outputs, const ClientGone& client_gone,
                                         Deadline deadline) {
  outputs.resize(layers.size());
  std::vector<LayerWork> works;
  for (size_t i = 0; i < layers.size(); ++i) {
    outputs[i].resize(x.size());
    works.push_back({layers[i], x.data(), rows, outputs[i].data()});
  }
  return compute(works, client_gone, deadline);
}

Result<double> FfnService::compute(std::span<LayerWork> works, const ClientGone& client_gone, Deadline deadline) {
  // Bounded queue: requests beyond max_queue waiting for the compute lock are turned away.
  struct Waiting {
    std::atomic<size_t>& n;
    ~Waiting() { --n; }
  } waiting{waiting_};
  if (++waiting_ > options_.max_queue + 1)
    return make_error(ErrorCode::overloaded, "server busy: more than " + std::to_string(options_.max_queue) +
                                                 " requests are waiting; retry later");
  double total_ms = 0;
  for (size_t i = 0; i < works.size(); ++i) {
    LayerWork& work = works[i];
    {
      std::lock_guard lock(pending_mutex_);
      pending_.push_back(&work);
    }
    struct Unregister {  // leaving early: no computation may take this work any more
      FfnService& s;
      LayerWork& w;
      ~Unregister() {
        std::lock_guard lock(s.pending_mutex_);
        std::erase(s.pending_, &w);
      }
    } unregister{*this, work};
    std::lock_guard turn(compute_turns_);
    // Between layers only: a single-layer call (the decode path) pays no system call for it.
    if (i > 0 && client_gone && client_gone()) {
      metrics_.count_cancelled();
      return make_error(ErrorCode::cancelled, "the client closed its connection after " + std::to_string(i) + " of " +
                                                  std::to_string(works.size()) + " layers; the rest was dropped");
    }
    if (deadline && std::chrono::steady_clock::now() > *deadline)  // the wait for this turn may have used it up
      return make_error(ErrorCode::deadline_exceeded, "the caller's deadline (" + std::string(kDeadlineHeader) +
                                                          ") passed after " + std::to_string(i) + " of " +
                                                          std::to_string(works.size()) + " layers; the work was dropped");
    double ms = 0;
    if (auto s = compute_layer(work, ms); !s) return s.error();
    total_ms += ms;
  }
  return total_ms;
}

Status FfnService::compute_layer(LayerWork& work, double& ms) {
  // Under the compute turn. Done already inside another request's product, or the first of
  // its layer and kind to get here: then it takes every waiting work of the same layer and
  // kind, up to max_work in all, in arrival order.
  std::vector<LayerWork*> batch;
  {
    std::lock_guard lock(pending_mutex_);
    if (work.done) {
      ms = work.ms;
      return work.error ? Status(*work.error) : Status(Ok{});
    }
    size_t total = 0;
    for (auto it = pending_.begin(); it != pending_.end();) {
      LayerWork* w = *it;
      if (w->layer == work.layer && w->experts() == work.experts() &&
          (w == &work || total + work.work() + w->work() <= options_.max_work)) {
        batch.push_back(w);
        total += w == &work ? 0 : w->work();
        it = pending_.erase(it);
      } else {
        ++it;
      }
    }
  }
  const auto start = std::chrono::steady_clock::now();
  Status status = compute_batch(batch);
  if (batch.size() > 1) metrics_.count_coalesced(batch.size() - 1);
  ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  metrics_.observe_compute(work.layer, ms);
  std::lock_guard lock(pending_mutex_);
  for (LayerWork* w : batch) {
    w->done = true;
    w->ms = ms;
    if (!status) w->error = status.error();
  }
  return status;
}

Status FfnService::compute_batch(const std::vector<LayerWork*>& batch) {
  const size_t H = model_.config.hidden;
  const LayerWork& first = *batch.front();
  if (batch.size() == 1)
    return first.experts() ? compute_.expert_rows(first.layer, {first.x, first.rows * H}, first.rows, first.assignments,
                                                  {first.out, first.assignments.size() * H})
                           : compute_.forward(first.layer, {first.x, first.rows * H}, first.rows, {first.out, first.rows * H});
  // Several requests' rows (and assignments, renumbered) one after another: each expert
  // then runs once over every row routed to it.
  size_t rows = 0, outputs = 0;
  for (const LayerWork* w : batch) rows += w->rows, outputs += w->experts() ? w->assignments.size() : w->rows;
  std::vector<float> x(rows * H), out(outputs * H);
  std::vector<ExpertAssignment> assignments;
  size_t r = 0;
  for (const LayerWork* w : batch) {
    std::copy(w->x, w->x + w->rows * H, x.begin() + std::ptrdiff_t(r * H));
    for (ExpertAssignment a : w->assignments) assignments.push_back({uint32_t(a.row + r), a.expert, a.weight});
    r += w->rows;
  }
  Status status = first.experts() ? compute_.expert_rows(first.layer, x, rows, assignments, out)
                                   : compute_.forward(first.layer, x, rows, out);
  size_t o = 0;
  for (LayerWork* w : batch) {
    const size_t n = w->experts() ? w->assignments.size() : w->rows;
    if (status) std::copy(out.begin() + std::ptrdiff_t(o * H), out.begin() + std::ptrdiff_t((o + n) * H), w->out);
    o += n;
  }
  return status;
}

Error FfnService::refuse_content_type(std::string_view content_type, std::optional<Encoding> known) const {
  std::string expected;
  for (Encoding e : options_.encodings.members()) expected += std::string(wire::content_type(e)) + ", ";
  std::string why;
  if (known == Encoding::i8) why = " (i8 is not enabled on this server: --wire-i8)";
  if (known == Encoding::q8)
    why = encoding_fits_hidden(Encoding::q8, model_.config.hidden)
              ? " (q8 is disabled on this server: --no-wire-q8 or LARQL_Q8_WIRE=0)"
              : " (q8 needs a hidden size that is a multiple of 32; this model's is " +
                    std::to_string(model_.config.hidden) + ")";
  return make_error(ErrorCode::unsupported_media_type, "Content-Type '" + std::string(content_type) +
                                                           "' is not accepted here; expected " + expected + "or " +
                                                           std::string(kContentTypeJson) + why);
}

HttpReply FfnService::walk_ffn(std::string_view body, std::string_view content_type, std::string_view accept,
                               const ClientGone& client_gone, Deadline deadline) {
  metrics_.count_request();
  if (auto s = check_body_size(body.size()); !s) return fail(s.error());
  const BodyType body_type = body_type_from_content_type(content_type);
  if (body_type.json) return walk_ffn_json(body, client_gone, deadline);
  const auto encoding = body_type.binary;
  if (!encoding || !options_.encodings.contains(*encoding)) return fail(refuse_content_type(content_type, encoding));

  const size_t hidden = model_.config.hidden;
  auto view = parse_request({reinterpret_cast<const uint8_t*>(body.data()), body.size()}, *encoding, hidden);
  if (!view) return fail(view.error());
  const size_t rows = view->header.seq_len;
  if (auto s = check_work(view->header.layers, rows); !s) return fail(s.error());
  std::vector<float> x(rows * hidden);
  if (auto s = decode_values(*encoding, view->values, rows, hidden, x); !s) return fail(s.error());
  metrics_.count_bytes_in(*encoding, body.size());

  std::vector<std::vector<float>> outputs;
  auto ms = compute_dense(view->header.layers, x, rows, outputs, client_gone, deadline);
  if (!ms) return ms.error().code == ErrorCode::cancelled ? error_reply(ms.error()) : fail(ms.error());

  const Encoding chosen = negotiate_response_encoding(accept, options_.encodings);
  std::vector<ResponseRecord> records;
  for (size_t i = 0; i < outputs.size(); ++i) records.push_back({view->header.layers[i], outputs[i]});
  HttpReply reply;
  auto enc = encode_response(chosen, records, uint32_t(rows), hidden, float(*ms), reply.body);
  if (!enc) return fail(enc.error());
  if (enc->fell_back) metrics_.count_f32_fallback();
  reply.content_type = std::string(wire::content_type(enc->encoding));
  metrics_.count_bytes_out(enc->encoding, reply.body.size());
  return reply;
}

HttpReply FfnService::walk_experts(std::string_view body, std::string_view content_type, std::string_view accept,
                                   const ClientGone& client_gone, Deadline deadline) {
  metrics_.count_request();
  if (auto s = check_body_size(body.size()); !s) return fail(s.error());
  const BodyType body_type = body_type_from_content_type(content_type);
  if (body_type.json)
    return fail(make_error(ErrorCode::unsupported_media_type,
                           "/v1/walk-experts has no JSON form (PROTOCOL §12); send a binary body (" +
                               std::string(wire::content_type(Encoding::f32)) + " or another offered encoding)"));
  const auto encoding = body_type.binary;
  if (!encoding || !options_.encodings.contains(*encoding)) return fail(refuse_content_type(content_type, encoding));

  // §12's order: framing, layer_out_of_range, layer_not_owned, not_moe_layer, bad_assignment,
  // expert_not_owned, values.
  const size_t hidden = model_.config.hidden;
  auto view = parse_expert_request({reinterpret_cast<const uint8_t*>(body.data()), body.size()}, *encoding, hidden);
  if (!view) return fail(view.error());
  if (auto s = check_layer(view->layer); !s) return fail(s.error());
  if (!model_.config.layer(view->layer).sparse)
    return fail(make_error(ErrorCode::not_moe_layer, "layer " + std::to_string(view->layer) +
                                                         " has no routed experts (a dense layer: send /v1/walk-ffn)"));
  const auto& assignments = view->assignments;
  if (auto s = check_assignments(assignments, view->rows, uint32_t(model_.config.moe.expert_ids())); !s) return fail(s.error());
  for (const ExpertAssignment& a : assignments)
    if (!options_.experts.contains(a.expert))
      return fail(make_error(ErrorCode::expert_not_owned, "expert " + std::to_string(a.expert) + " of layer " +
                                                              std::to_string(view->layer) +
                                                              " is not served here: this shard owns experts " +
                                                              options_.experts.str()));
  if (assignments.size() > options_.max_work)
    return fail(make_error(ErrorCode::work_too_large, std::to_string(assignments.size()) +
                                                          " assignments × 1 layer is above this server's limit of " +
                                                          std::to_string(options_.max_work) + " (--max-work); split the request"));
  const size_t rows = view->rows;
  std::vector<float> x(rows * hidden);
  if (auto s = decode_values(*encoding, view->values, rows, hidden, x); !s) return fail(s.error());
  metrics_.count_bytes_in(*encoding, body.size());

  std::vector<float> expert_rows(assignments.size() * hidden);
  LayerWork work{view->layer, x.data(), rows, expert_rows.data(), assignments};
  auto ms = compute({&work, 1}, client_gone, deadline);
  if (!ms) return ms.error().code == ErrorCode::cancelled ? error_reply(ms.error()) : fail(ms.error());

  const Encoding chosen = negotiate_response_encoding(accept, options_.encodings);
  HttpReply reply;
  Result<EncodeOutcome> enc = EncodeOutcome{chosen};
  if (view->expert_rows()) {
    enc = encode_expert_rows_response(chosen, view->layer, uint32_t(assignments.size()), hidden, expert_rows, float(*ms),
                                      reply.body);
  } else {
    std::vector<float> sums(rows * hidden);
    sum_expert_rows(assignments, expert_rows.data(), hidden, sums.data());
    const ResponseRecord record{view->layer, sums};
    enc = encode_response(chosen, {&record, 1}, uint32_t(rows), hidden, float(*ms), reply.body);
  }
  if (!enc) return fail(enc.error());
  if (enc->fell_back) metrics_.count_f32_fallback();
  reply.content_type = std::string(wire::content_type(enc->encoding));
  metrics_.count_bytes_out(enc->encoding, reply.body.size());
  return reply;
}

HttpReply FfnService::reference_layer_batch(std::string_view body, bool f16, const ClientGone& client_gone, Deadline deadline) {
  metrics_.count_request();
  if (auto s = check_body_size(body.size()); !s) return fail(s.error());
  const ModelConfig& c = model_.config;
  const size_t H = c.hidden;
  auto request = parse_reference_expert_request({reinterpret_cast<const uint8_t*>(body.data()), body.size()}, f16, H);
  if (!request) return fail(request.error());
  if (auto s = check_layer(request->layer); !s) return fail(s.error());
  if (!c.layer(request->layer).sparse)
    return fail(make_error(ErrorCode::not_moe_layer, "layer " + std::to_string(request->layer) + " has no routed experts"));
  for (const ReferenceExpert& e : request->experts)
    if (!options_.experts.contains(e.expert) || e.expert >= c.moe.expert_ids())
      return fail(make_error(ErrorCode::expert_not_owned, "expert " + std::to_string(e.expert) + " not owned by this shard (owns " +
                                                              options_.experts.str() + ")"));
  std::vector<float> sum(H, 0.0f);
  double ms = 0;
  if (!request->experts.empty()) {
    // The shard applies the pre-experts norm here (Gemma 4's own expert norm; else the FFN's).
    const LayerWeights& w = model_.layers[request->layer];
    std::vector<float> x(H);
    rmsnorm_rows(x.data(), request->residual.data(), 1, c.moe.beside_dense ? w.expert_norm : w.ffn_norm, H, c.norm_eps,
                 c.norm_weight_offset);
    // Each distinct expert once (as §12's assignments), then summed in the caller's order.
    std::vector<ExpertAssignment> distinct;
    for (const ReferenceExpert& e : request->experts) distinct.push_back({0, e.expert, 1.0f});
    std::sort(distinct.begin(), distinct.end(), [](const auto& a, const auto& b) { return a.expert < b.expert; });
    distinct.erase(std::unique(distinct.begin(), distinct.end(), [](const auto& a, const auto& b) { return a.expert == b.expert; }),
                   distinct.end());
    std::vector<float> rows(distinct.size() * H);
    LayerWork work{request->layer, x.data(), 1, rows.data(), distinct};
    auto computed = compute({&work, 1}, client_gone, deadline);
    if (!computed) return computed.error().code == ErrorCode::cancelled ? error_reply(computed.error()) : fail(computed.error());
    ms = *computed;
    for (size_t i = 0; i < request->experts.size(); ++i) {
      const ReferenceExpert& e = request->experts[i];
      const size_t at = size_t(std::lower_bound(distinct.begin(), distinct.end(), e.expert,
                                                [](const ExpertAssignment& a, uint32_t id) { return a.expert < id; }) - distinct.begin());
      for (size_t k = 0; k < H; ++k) sum[k] = i == 0 ? e.weight * rows[at * H + k] : sum[k] + e.weight * rows[at * H + k];
    }
  }
  auto encoded = encode_reference_expert_response(sum, float(ms), f16);
  if (!encoded) return fail(encoded.error());
  return {200, f16 ? "application/x-larql-experts-layer-f16" : "application/x-larql-experts-layer", std::move(*encoded)};
}

HttpReply FfnService::walk_ffn_json(std::string_view body, const ClientGone& client_gone, Deadline deadline) {
  auto req = parse_json_request(body, model_.config.hidden);
  if (!req) return fail(req.error());
  if (auto s = check_work(req->layers, req->seq_len); !s) return fail(s.error());
  std::vector<std::vector<float>> outputs;
  auto ms = compute_dense(req->layers, req->residual, req->seq_len, outputs, client_gone, deadline);
  if (!ms) return ms.error().code == ErrorCode::cancelled ? error_reply(ms.error()) : fail(ms.error());
  std::vector<ResponseRecord> records;
  for (size_t i = 0; i < outputs.size(); ++i) records.push_back({req->layers[i], outputs[i]});
  auto text = encode_json_response(records, req->seq_len, float(*ms));
  if (!text) return fail(text.error());
  metrics_.count_json_bytes(body.size(), text->size());
  return {200, std::string(kContentTypeJson), std::move(*text)};
}

json FfnService::stats() const {
  json fingerprints = json::object();
  for (uint32_t l = options_.layers.first; l <= options_.layers.last; ++l)
    fingerprints[std::to_string(l)] = fingerprints_[l - options_.layers.first];
  std::vector<std::string> formats;
  for (Encoding e : options_.encodings.members()) formats.emplace_back(encoding_name(e));
  json doc{{"ffn_arithmetic", model_.ffn_arithmetic(options_.layers.first, options_.layers.last).name()},
          {"model", model_.config.name},
          {"family", model_.config.family},
          {"hidden_size", model_.config.hidden},
          {"num_layers", model_.config.layers},
          {"layers", {{"start", options_.layers.first}, {"end", options_.layers.last}}},
          {"mode", "ffn-service"},
          {"max_body_bytes", options_.max_body_bytes},
          {"max_work", options_.max_work},
          {"wire", {{"request", formats}, {"response", formats}}},
          {"layer_fingerprints", fingerprints}};
  const MoeSpec& moe = model_.config.moe;
  if (moe.experts) {
    json experts = json::object();
    for (uint32_t l = options_.layers.first; l <= options_.layers.last; ++l)
      if (const std::string& f = expert_fingerprints_[l - options_.layers.first]; !f.empty()) experts[std::to_string(l)] = f;
    doc["experts"] = {{"count", moe.experts}, {"shared", moe.shared_experts}, {"used", moe.experts_used},
                      {"start", options_.experts.first}, {"end", options_.experts.last}};
    doc["expert_fingerprints"] = experts;
    // Who runs the router when a client sends /v1/walk-ffn for a MoE layer: this shard, where
    // the router reads the FFN input and it owns every expert; else the client (§12).
    doc["routing"] = !moe.beside_dense && owns_all_experts() ? "shard" : "client";
  }
  return doc;
}

json FfnService::health() const {
  const double up = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  return {{"status", "ok"}, {"uptime_seconds", up}, {"requests_served", metrics_.requests()}};
}

}  // namespace larql
