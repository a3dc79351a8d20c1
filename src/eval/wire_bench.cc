#include "eval/wire_bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "eval/logit_compare.h"
#include "infer/local_ffn.h"
#include "infer/generate.h"
#include "infer/sampler.h"
#include "infer/transformer.h"
#include "net/remote_ffn.h"
#include "net/remote_layers.h"
#include "wire/wire_config.h"

namespace larql {

using Clock = std::chrono::steady_clock;

namespace {

// One format's path to the shards: FFN mode (a round trip per layer) or layer-range sessions
// (one per range); what a transformer runs through, and the traffic so far in one shape.
struct RemotePath {
  std::unique_ptr<RemoteFfn> ffn;
  std::unique_ptr<RemoteLayers> sessions;
  FfnBackend& backend(FfnBackend& local) { return ffn ? static_cast<FfnBackend&>(*ffn) : local; }
  Status attach(Transformer& t) { return sessions ? t.set_layer_ranges(sessions->ranges()) : Status(Ok{}); }
  RemoteFfnStats stats() const {
    if (ffn) return ffn->stats();
    RemoteFfnStats s;
    const RemoteLayersStats& l = sessions->stats();
    s.calls = l.steps, s.round_trips = l.round_trips, s.bytes_sent = l.bytes_sent, s.bytes_received = l.bytes_received;
    s.head_bytes_sent = l.head_bytes_sent, s.head_bytes_received = l.head_bytes_received;
    s.remote_ms = l.remote_ms, s.server_ms = l.server_ms, s.f32_fallbacks = l.f32_fallbacks;
    return s;
  }
};

struct Trajectory {
  std::vector<int> tokens;                 // the greedy token chosen at each step
  std::vector<std::vector<float>> logits;  // the logits each step chose from
};

// Greedy for `steps` tokens; or, with `forced`, feeding those tokens instead of its own.
Result<Trajectory> decode(const Model& m, FfnBackend& ffn, ThreadPool& pool, const std::vector<int>& prompt, size_t steps,
                          const std::vector<int>* forced, RemotePath* remote, FormatReport* timing) {
  Transformer t(m, ffn, pool);
  if (remote)
    if (auto s = remote->attach(t); !s) return s.error();
  Trajectory out;
  std::vector<float> logits;
  if (auto s = t.forward(prompt, 0, logits); !s) return s.error();
  const RemoteFfnStats before = remote ? remote->stats() : RemoteFfnStats{};
  double wall_ms = 0;
  size_t pos = prompt.size();
  for (size_t s = 0; s < steps; ++s) {
    out.logits.push_back(logits);
    out.tokens.push_back(argmax(logits));
    if (s + 1 == steps || pos >= m.config.context) break;
    const int next = forced ? (*forced)[s] : out.tokens.back();
    const auto start = Clock::now();
    if (auto st = t.forward({&next, 1}, pos++, logits); !st) return st.error();
    wall_ms += std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  }
  if (timing && remote && out.tokens.size() > 1) {  // per decoded token, prefill excluded
    const RemoteFfnStats after = remote->stats();
    const double n = double(out.tokens.size() - 1);
    timing->bytes_sent_per_token += double(after.bytes_sent - before.bytes_sent) / n;
    timing->bytes_received_per_token += double(after.bytes_received - before.bytes_received) / n;
    timing->head_bytes_sent_per_token += double(after.head_bytes_sent - before.head_bytes_sent) / n;
    timing->head_bytes_received_per_token += double(after.head_bytes_received - before.head_bytes_received) / n;
    timing->round_trips_per_token += double(after.round_trips - before.round_trips) / n;
    timing->ms_per_token += wall_ms / n;
    timing->server_ms_per_token += (after.server_ms - before.server_ms) / n;
    timing->transport_ms_per_token += (after.remote_ms - before.remote_ms - (after.server_ms - before.server_ms)) / n;
    timing->local_ms_per_token += (wall_ms - (after.remote_ms - before.remote_ms)) / n;
    timing->f32_fallbacks += after.f32_fallbacks - before.f32_fallbacks;
  }
  return out;
}

// The calls' traffic between two snapshots, as `before` and `after` of a RemoteFfn's stats.
RemoteFfnStats traffic_between(const RemoteFfnStats& before, const RemoteFfnStats& after) {
  RemoteFfnStats d;
  d.round_trips = after.round_trips - before.round_trips;
  d.bytes_sent = after.bytes_sent - before.bytes_sent;
  d.bytes_received = after.bytes_received - before.bytes_received;
  d.head_bytes_sent = after.head_bytes_sent - before.head_bytes_sent;
  d.head_bytes_received = after.head_bytes_received - before.head_bytes_received;
  d.remote_ms = after.remote_ms - before.remote_ms;
  d.server_ms = after.server_ms - before.server_ms;
  d.f32_fallbacks = after.f32_fallbacks - before.f32_fallbacks;
  return d;
}

// Tokens/s each link would give at this per-token cost.
void project(FormatReport& fr, const std::vector<Link>& links) {
  for (const auto& link : links) {
    const double ms = projected_ms_per_token({.local_ms = fr.local_ms_per_token,
                                              .server_ms = fr.server_ms_per_token,
                                              .transport_ms = fr.transport_ms_per_token,
                                              .round_trips = fr.round_trips_per_token,
                                              .body_bytes_sent = fr.bytes_sent_per_token,
                                              .body_bytes_received = fr.bytes_received_per_token,
                                              .head_bytes_sent = fr.head_bytes_sent_per_token,
                                              .head_bytes_received = fr.head_bytes_received_per_token},
                                             link);
    fr.projected_tokens_per_second[link.name] = ms > 0 ? 1000.0 / ms : 0.0;
  }
}

// Each prompt decoded greedily through `remote`, plain and speculatively; the speculative
// run's traffic per decoded token is its whole run's less a prefill's (measured alone).
Result<SpeculativeReport> speculate(const Model& model, RemotePath& remote, FfnBackend& local, wire::Encoding wire,
                                    ThreadPool& pool, const WireBenchOptions& o) {
  SpeculativeReport r;
  r.draft = o.draft_name;
  r.cost.wire = wire;
  double wall_ms = 0;
  RemoteFfnStats decode;
  const GenerateOptions plain_options{.max_new_tokens = o.steps, .ignore_eos = true};
  GenerateOptions speculative_options = plain_options;
  speculative_options.speculative = o.speculative;
  for (const auto& prompt : o.prompts) {
    Transformer t(model, remote.backend(local), pool);
    if (auto s = remote.attach(t); !s) return s.error();
    auto plain = generate(t, prompt, plain_options);
    if (!plain) return plain.error();
    std::vector<float> logits;
    const RemoteFfnStats s0 = remote.stats();
    if (auto s = t.forward(prompt, 0, logits); !s) return s.error();
    const RemoteFfnStats prefill = traffic_between(s0, remote.stats());
    const RemoteFfnStats s1 = remote.stats();
    auto fast = generate(t, prompt, speculative_options);
    if (!fast) return fast.error();
    const RemoteFfnStats run = traffic_between(s1, remote.stats());
    r.same_ids &= fast->generated == plain->generated;
    r.tokens += fast->generated.size() - 1;  // the first comes from the prefill
    r.passes += fast->passes;
    r.drafted += fast->drafted;
    r.accepted += fast->accepted;
    wall_ms += fast->decode_seconds * 1000;
    const RemoteFfnStats d = traffic_between(prefill, run);
    decode.round_trips += d.round_trips, decode.bytes_sent += d.bytes_sent, decode.bytes_received += d.bytes_received;
    decode.head_bytes_sent += d.head_bytes_sent, decode.head_bytes_received += d.head_bytes_received;
    decode.remote_ms += d.remote_ms, decode.server_ms += d.server_ms, decode.f32_fallbacks += d.f32_fallbacks;
  }
  const double n = double(std::max<size_t>(r.tokens, 1));
  FormatReport& c = r.cost;
  c.round_trips_per_token = double(decode.round_trips) / n;
  c.bytes_sent_per_token = double(decode.bytes_sent) / n;
  c.bytes_received_per_token = double(decode.bytes_received) / n;
  c.head_bytes_sent_per_token = double(decode.head_bytes_sent) / n;
  c.head_bytes_received_per_token = double(decode.head_bytes_received) / n;
  c.ms_per_token = wall_ms / n;
  c.server_ms_per_token = decode.server_ms / n;
  c.transport_ms_per_token = (decode.remote_ms - decode.server_ms) / n;
  c.local_ms_per_token = (wall_ms - decode.remote_ms) / n;
  c.f32_fallbacks = decode.f32_fallbacks;
  project(c, o.links);
  return r;
}

}  // namespace

Result<WireBenchReport> run_wire_bench(const Model& model, const WireBenchOptions& o) {
  WireBenchReport report;
  report.model = model.config.name;
  report.steps = o.steps;
  report.k = o.k;
  report.local_reference = o.local_reference;
  ThreadPool pool(o.threads);
  LocalFfn local(model, pool);

  std::vector<RemotePath> remotes;
  std::vector<wire::Encoding> formats{wire::Encoding::f32};  // f32 always: the reference or checked against it
  for (auto e : o.formats)
    if (e != wire::Encoding::f32) formats.push_back(e);
  size_t longest_prompt = 0;
  for (const auto& p : o.prompts) longest_prompt = std::max(longest_prompt, p.size());
  for (auto e : formats) {
    std::vector<std::string> warnings;
    auto w = wire::client_wire(std::string(wire::encoding_name(e)), [](const char*) { return nullptr; });
    RemotePath path;
    if (o.sessions) {
      auto r = RemoteLayers::connect(model, {o.ffn_spec, *w, o.api_key, o.ca_cert, 30000, longest_prompt + o.steps + 1}, &warnings);
      if (!r) return r.error();
      path.sessions = std::move(*r);
    } else {
      auto r = RemoteFfn::connect(model, {o.ffn_spec, *w, o.api_key, o.ca_cert, 30000, 0, o.expert_rows}, &warnings);
      if (!r) return r.error();
      if ((*r)->request_encodings() != wire::EncodingSet{e})
        return make_error(ErrorCode::invalid_argument,
                          "the shards do not all take " + std::string(wire::encoding_name(e)) + " requests (they are sent " +
                              wire::describe((*r)->request_encodings()) +
                              "): start them with --wire-i8 for i8, without --no-wire-q8 for q8, or leave it out of --wire");
      path.ffn = std::move(*r);
    }
    remotes.push_back(std::move(path));
    FormatReport format;
    format.wire = e;
    report.formats.push_back(std::move(format));
  }

  size_t total_steps = 0;
  for (const auto& prompt : o.prompts) {
    // The reference: the local FFN, or remote f32 (over sessions the recorder sees no FFN call).
    RangeRecorder recorder(o.local_reference ? static_cast<FfnBackend&>(local) : remotes[0].backend(local), model.config.layers);
    auto reference = decode(model, recorder, pool, prompt, o.steps, nullptr, o.local_reference ? nullptr : &remotes[0], nullptr);
    if (!reference) return reference.error();
    report.layers.resize(recorder.layers().size());
    for (size_t l = 0; l < report.layers.size(); ++l) {  // over all prompts: largest values, total count
      auto& a = report.layers[l];
      const auto& b = recorder.layers()[l];
      a.max_abs_input = std::max(a.max_abs_input, b.max_abs_input);
      a.max_abs_output = std::max(a.max_abs_output, b.max_abs_output);
      a.beyond_f16 += b.beyond_f16;
    }
    const size_t steps = reference->tokens.size();
    total_steps += steps;
    for (size_t f = 0; f < formats.size(); ++f) {
      FormatReport& fr = report.formats[f];
      auto forced = decode(model, remotes[f].backend(local), pool, prompt, steps, &reference->tokens, &remotes[f], &fr);
      if (!forced) return forced.error();
      for (size_t s = 0; s < steps; ++s) {
        const auto c = compare_logits(reference->logits[s], forced->logits[s], o.k);
        fr.exact &= c.bit_identical;
        fr.top1_agreement += c.top1_equal;
        fr.topk_agreement += c.topk_equal;
        fr.max_abs_logit_diff = std::max(fr.max_abs_logit_diff, c.max_abs_diff);
        fr.mean_kl += c.kl;
        fr.max_kl = std::max(fr.max_kl, c.kl);
        fr.kl_per_step.push_back(c.kl);
        fr.topk_per_step.push_back(c.topk_equal);
      }
      auto free = decode(model, remotes[f].backend(local), pool, prompt, steps, nullptr, &remotes[f], nullptr);
      if (!free) return free.error();
      for (size_t s = 0; s < free->tokens.size() && !fr.first_divergence_step; ++s)
        if (free->tokens[s] != reference->tokens[s]) fr.first_divergence_step = total_steps - steps + s;
    }
  }
  report.total_steps = total_steps;
  const double prompts = double(o.prompts.size());
  for (auto& fr : report.formats) {
    fr.top1_agreement /= double(total_steps);
    fr.topk_agreement /= double(total_steps);
    fr.mean_kl /= double(total_steps);
    for (double* v : {&fr.bytes_sent_per_token, &fr.bytes_received_per_token, &fr.head_bytes_sent_per_token,
                      &fr.head_bytes_received_per_token, &fr.round_trips_per_token, &fr.ms_per_token,
                      &fr.server_ms_per_token, &fr.transport_ms_per_token, &fr.local_ms_per_token})
      *v /= prompts;
    project(fr, o.links);
  }
  report.remote_f32_exact = report.formats[0].exact;
  report.links = o.links;
  if (o.speculative) {
    auto spec = speculate(model, remotes.back(), local, formats.back(), pool, o);
    if (!spec) return spec.error();
    report.speculative = std::move(*spec);
  }
  return report;
}

}  // namespace larql
