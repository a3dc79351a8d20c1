#include "net/ffn_service.h"

#include "model/fingerprint.h"
#include "wire/accept.h"
#include "wire/codec.h"
#include "wire/json_codec.h"

namespace larql {

using nlohmann::json;
using namespace wire;

FfnService::FfnService(const Model& model, FfnBackend& compute, FfnServiceOptions options)
    : model_(model), compute_(compute), options_(options) {
  options_.encodings.insert(Encoding::f32);
  if (!encoding_fits_hidden(Encoding::q8, model_.config.hidden)) options_.encodings.erase(Encoding::q8);
  for (uint32_t l = options_.layers.first; l <= options_.layers.last; ++l)
    fingerprints_.push_back(layer_fingerprint(model_, l));
}

HttpReply FfnService::fail(const Error& e) {
  metrics_.count_error(e.code);
  return error_reply(e);
}

Status FfnService::check_work(const std::vector<uint32_t>& layers, size_t rows) const {
  if (auto s = check_distinct_layers(layers); !s) return s;
  if (layers.size() * rows > options_.max_work)
    return make_error(ErrorCode::work_too_large, std::to_string(rows) + " positions × " + std::to_string(layers.size()) +
                                                     " layers = " + std::to_string(rows * layers.size()) +
                                                     " row-layers is above this server's limit of " +
                                                     std::to_string(options_.max_work) + " (--max-work); split the request");
  for (uint32_t l : layers) {
    if (l >= model_.config.layers)
      return make_error(ErrorCode::layer_out_of_range, "layer " + std::to_string(l) + " is out of range: the model has " +
                                                           std::to_string(model_.config.layers) + " layers (0-" +
                                                           std::to_string(model_.config.layers - 1) + ")");
    if (!options_.layers.contains(l))
      return make_error(ErrorCode::layer_not_owned, "layer " + std::to_string(l) + " is not served here: this shard owns layers " +
                                                        options_.layers.str());
  }
  return Ok{};
}

Result<double> FfnService::compute(const std::vector<uint32_t>& layers, const std::vector<float>& x, size_t rows,
                                   std::vector<std::vector<float>>& outputs, const ClientGone& client_gone,
                                   Deadline deadline) {
  // Bounded queue: requests beyond max_queue waiting for the compute lock are turned away.
  struct Waiting {
    std::atomic<size_t>& n;
    ~Waiting() { --n; }
  } waiting{waiting_};
  if (++waiting_ > options_.max_queue + 1)
    return make_error(ErrorCode::overloaded, "server busy: more than " + std::to_string(options_.max_queue) +
                                                 " requests are waiting; retry later");
  double total_ms = 0;
  outputs.resize(layers.size());
  for (size_t i = 0; i < layers.size(); ++i) {
    outputs[i].resize(x.size());
    LayerWork work{layers[i], x.data(), rows, outputs[i].data()};
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
                                                  std::to_string(layers.size()) + " layers; the rest was dropped");
    }
    if (deadline && std::chrono::steady_clock::now() > *deadline)  // the wait for this turn may have used it up
      return make_error(ErrorCode::deadline_exceeded, "the caller's deadline (" + std::string(kDeadlineHeader) +
                                                          ") passed after " + std::to_string(i) + " of " +
                                                          std::to_string(layers.size()) + " layers; the work was dropped");
    double ms = 0;
    if (auto s = compute_layer(work, ms); !s) return s.error();
    total_ms += ms;
  }
  return total_ms;
}

Status FfnService::compute_layer(LayerWork& work, double& ms) {
  // Under the compute turn. Done already inside another request's matmul, or the first of
  // its layer to get here: then it takes every waiting work of the same layer, up to
  // max_work rows in all, in arrival order.
  std::vector<LayerWork*> batch;
  {
    std::lock_guard lock(pending_mutex_);
    if (work.done) {
      ms = work.ms;
      return work.error ? Status(*work.error) : Status(Ok{});
    }
    size_t rows = 0;
    for (auto it = pending_.begin(); it != pending_.end();) {
      LayerWork* w = *it;
      if (w->layer == work.layer && (w == &work || rows + work.rows + w->rows <= options_.max_work)) {
        batch.push_back(w);
        rows += w == &work ? 0 : w->rows;
        it = pending_.erase(it);
      } else {
        ++it;
      }
    }
  }
  const size_t H = model_.config.hidden;
  size_t total_rows = 0;
  for (const LayerWork* w : batch) total_rows += w->rows;
  const auto start = std::chrono::steady_clock::now();
  Status status = Ok{};
  if (batch.size() == 1) {
    status = compute_.forward(work.layer, {work.x, work.rows * H}, work.rows, {work.out, work.rows * H});
  } else {
    std::vector<float> x(total_rows * H), out(total_rows * H);
    size_t r = 0;
    for (const LayerWork* w : batch) {
      std::copy(w->x, w->x + w->rows * H, x.begin() + std::ptrdiff_t(r * H));
      r += w->rows;
    }
    status = compute_.forward(work.layer, x, total_rows, out);
    r = 0;
    for (LayerWork* w : batch) {
      if (status) std::copy(out.begin() + std::ptrdiff_t(r * H), out.begin() + std::ptrdiff_t((r + w->rows) * H), w->out);
      r += w->rows;
    }
    metrics_.count_coalesced(batch.size() - 1);
  }
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
  if (body.size() > options_.max_body_bytes)
    return fail(make_error(ErrorCode::body_too_large, "body has " + std::to_string(body.size()) + " bytes; the limit is " +
                                                          std::to_string(options_.max_body_bytes)));
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
  auto ms = compute(view->header.layers, x, rows, outputs, client_gone, deadline);
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

HttpReply FfnService::walk_ffn_json(std::string_view body, const ClientGone& client_gone, Deadline deadline) {
  auto req = parse_json_request(body, model_.config.hidden);
  if (!req) return fail(req.error());
  if (auto s = check_work(req->layers, req->seq_len); !s) return fail(s.error());
  std::vector<std::vector<float>> outputs;
  auto ms = compute(req->layers, req->residual, req->seq_len, outputs, client_gone, deadline);
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
  return {{"ffn_arithmetic", arithmetic_name(model_.ffn_arithmetic(options_.layers.first, options_.layers.last))},
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
}

json FfnService::health() const {
  const double up = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  return {{"status", "ok"}, {"uptime_seconds", up}, {"requests_served", metrics_.requests()}};
}

}  // namespace larql
