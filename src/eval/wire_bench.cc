#include "eval/wire_bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <sstream>

#include "eval/logit_compare.h"
#include "infer/local_ffn.h"
#include "infer/sampler.h"
#include "infer/transformer.h"
#include "net/remote_ffn.h"
#include "wire/wire_config.h"

namespace larql {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

namespace {

struct Trajectory {
  std::vector<int> tokens;                 // the greedy token chosen at each step
  std::vector<std::vector<float>> logits;  // the logits each step chose from
};

// Greedy for `steps` tokens; or, with `forced`, feeding those tokens instead of its own.
Result<Trajectory> decode(const Model& m, FfnBackend& ffn, ThreadPool& pool, const std::vector<int>& prompt, size_t steps,
                          const std::vector<int>* forced, RemoteFfn* remote, FormatReport* timing) {
  Transformer t(m, ffn, pool);
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
    const RemoteFfnStats& after = remote->stats();
    const double n = double(out.tokens.size() - 1);
    timing->bytes_sent_per_token += double(after.bytes_sent - before.bytes_sent) / n;
    timing->bytes_received_per_token += double(after.bytes_received - before.bytes_received) / n;
    timing->head_bytes_sent_per_token += double(after.head_bytes_sent - before.head_bytes_sent) / n;
    timing->head_bytes_received_per_token += double(after.head_bytes_received - before.head_bytes_received) / n;
    timing->round_trips_per_token += double(after.calls - before.calls) / n;
    timing->ms_per_token += wall_ms / n;
    timing->server_ms_per_token += (after.server_ms - before.server_ms) / n;
    timing->transport_ms_per_token += (after.remote_ms - before.remote_ms - (after.server_ms - before.server_ms)) / n;
    timing->local_ms_per_token += (wall_ms - (after.remote_ms - before.remote_ms)) / n;
    timing->f32_fallbacks += after.f32_fallbacks - before.f32_fallbacks;
  }
  return out;
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

  std::vector<std::unique_ptr<RemoteFfn>> remotes;
  std::vector<wire::Encoding> formats{wire::Encoding::f32};  // f32 always: the reference or checked against it
  for (auto e : o.formats)
    if (e != wire::Encoding::f32) formats.push_back(e);
  for (auto e : formats) {
    std::vector<std::string> warnings;
    auto w = wire::client_wire(std::string(wire::encoding_name(e)), [](const char*) { return nullptr; });
    auto r = RemoteFfn::connect(model, {o.ffn_spec, *w, o.api_key, o.ca_cert, 30000}, &warnings);
    if (!r) return r.error();
    if ((*r)->request_encodings() != wire::EncodingSet{e})
      return make_error(ErrorCode::invalid_argument,
                        "the shards do not all take " + std::string(wire::encoding_name(e)) + " requests (they are sent " +
                            wire::describe((*r)->request_encodings()) +
                            "): start them with --wire-i8 for i8, without --no-wire-q8 for q8, or leave it out of --wire");
    remotes.push_back(std::move(*r));
    FormatReport format;
    format.wire = e;
    report.formats.push_back(std::move(format));
  }

  size_t total_steps = 0;
  for (const auto& prompt : o.prompts) {
    RangeRecorder recorder(o.local_reference ? static_cast<FfnBackend&>(local) : *remotes[0], model.config.layers);
    auto reference = decode(model, recorder, pool, prompt, o.steps, nullptr, nullptr, nullptr);
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
      auto forced = decode(model, *remotes[f], pool, prompt, steps, &reference->tokens, remotes[f].get(), &fr);
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
      auto free = decode(model, *remotes[f], pool, prompt, steps, nullptr, nullptr, nullptr);
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
    for (const auto& link : o.links) {
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
  report.remote_f32_exact = report.formats[0].exact;
  report.links = o.links;
  return report;
}

json report_json(const WireBenchReport& r) {
  json formats = json::array();
  for (const auto& f : r.formats)
    formats.push_back({{"wire", wire::encoding_name(f.wire)},
                       {"exact", f.exact},
                       {"top1_agreement", f.top1_agreement},
                       {"topk_agreement", f.topk_agreement},
                       {"max_abs_logit_diff", f.max_abs_logit_diff},
                       {"mean_kl", f.mean_kl},
                       {"max_kl", f.max_kl},
                       {"first_divergence_step", f.first_divergence_step ? json(*f.first_divergence_step) : json(nullptr)},
                       {"bytes_sent_per_token", f.bytes_sent_per_token},
                       {"bytes_received_per_token", f.bytes_received_per_token},
                       {"head_bytes_sent_per_token", f.head_bytes_sent_per_token},
                       {"head_bytes_received_per_token", f.head_bytes_received_per_token},
                       {"round_trips_per_token", f.round_trips_per_token},
                       {"ms_per_token", f.ms_per_token},
                       {"server_ms_per_token", f.server_ms_per_token},
                       {"transport_ms_per_token", f.transport_ms_per_token},
                       {"local_ms_per_token", f.local_ms_per_token},
                       {"f32_fallbacks", f.f32_fallbacks},
                       {"projected_tokens_per_second", f.projected_tokens_per_second},
                       {"kl_per_step", f.kl_per_step}});
  json layers = json::array();
  for (size_t l = 0; l < r.layers.size(); ++l)
    layers.push_back({{"layer", l}, {"max_abs_input", r.layers[l].max_abs_input},
                      {"max_abs_output", r.layers[l].max_abs_output}, {"beyond_f16", r.layers[l].beyond_f16}});
  return {{"model", r.model},
          {"steps", r.steps},
          {"total_steps", r.total_steps},
          {"k", r.k},
          {"reference", r.local_reference ? "local" : "remote f32"},
          {"remote_f32_exact", r.remote_f32_exact},
          {"formats", formats},
          {"layers", layers},
          {"projection_formula", kProjectionFormula}};
}

std::string report_table(const WireBenchReport& r) {
  std::ostringstream o;
  char line[512];
  o << "model " << r.model << ", " << r.steps << " steps per prompt, top-" << r.k << ", reference: "
    << (r.local_reference ? "local FFN" : "remote f32") << "\n\n";
  std::snprintf(line, sizeof line, "%-5s %-6s %7s %7s %10s %10s %10s %6s %9s %9s %7s %8s %9s %9s %6s\n", "wire", "exact",
                "top1", "topK", "max|Δlog|", "mean KL", "max KL", "diverg", "sent B/t", "recv B/t", "RT/t", "ms/t",
                "server ms", "transp ms", "f32fb");
  o << line;
  for (const auto& f : r.formats) {
    std::snprintf(line, sizeof line, "%-5s %-6s %7.3f %7.3f %10.3g %10.3g %10.3g %6s %9.0f %9.0f %7.1f %8.2f %9.2f %9.2f %6zu\n",
                  std::string(wire::encoding_name(f.wire)).c_str(), f.exact ? "yes" : "no", f.top1_agreement,
                  f.topk_agreement, double(f.max_abs_logit_diff), f.mean_kl, f.max_kl,
                  f.first_divergence_step ? std::to_string(*f.first_divergence_step).c_str() : "none",
                  f.bytes_sent_per_token, f.bytes_received_per_token, f.round_trips_per_token, f.ms_per_token,
                  f.server_ms_per_token, f.transport_ms_per_token, f.f32_fallbacks);
    o << line;
  }
  o << "\nprojected tokens/s per link (" << kProjectionFormula << "):\n";
  for (const auto& f : r.formats) {
    o << "  " << wire::encoding_name(f.wire) << ":";
    for (const auto& link : r.links) {
      std::snprintf(line, sizeof line, "  %s %.1f", link.name.c_str(), f.projected_tokens_per_second.at(link.name));
      o << line;
    }
    o << "\n";
  }
  o << "\nFFN value range per layer (max |x| in, max |y| out, values beyond f16's ±65504):\n";
  for (size_t l = 0; l < r.layers.size(); ++l) {
    std::snprintf(line, sizeof line, "  layer %2zu: in %10.4g  out %10.4g  beyond f16 %zu\n", l, double(r.layers[l].max_abs_input),
                  double(r.layers[l].max_abs_output), r.layers[l].beyond_f16);
    o << line;
  }
  return o.str();
}

std::string report_svg(const WireBenchReport& r) {
  // Left: KL(p_ref ‖ p_wire) per step for each format (log scale). Right: bytes per token.
  const double W = 900, H = 360, plot_w = 560, plot_h = 260, x0 = 70, y0 = 40;
  const char* colors[] = {"#1b7837", "#2166ac", "#b2182b"};
  std::ostringstream o;
  o << "<svg xmlns='http://www.w3.org/2000/svg' width='" << W << "' height='" << H << "' font-family='sans-serif' font-size='12'>\n"
    << "<rect width='100%' height='100%' fill='white'/>\n"
    << "<text x='" << x0 << "' y='20' font-size='14'>" << r.model << ": KL(p_ref ‖ p_wire) per step (log10)</text>\n"
    << "<line x1='" << x0 << "' y1='" << y0 + plot_h << "' x2='" << x0 + plot_w << "' y2='" << y0 + plot_h << "' stroke='black'/>\n"
    << "<line x1='" << x0 << "' y1='" << y0 << "' x2='" << x0 << "' y2='" << y0 + plot_h << "' stroke='black'/>\n";
  const double lo = -12, hi = 1;  // log10 KL axis; exact zeros sit on the floor
  for (int e = int(lo); e <= int(hi); e += 3) {
    const double y = y0 + plot_h * (hi - e) / (hi - lo);
    o << "<text x='" << x0 - 8 << "' y='" << y + 4 << "' text-anchor='end'>1e" << e << "</text>\n"
      << "<line x1='" << x0 << "' y1='" << y << "' x2='" << x0 + plot_w << "' y2='" << y << "' stroke='#ddd'/>\n";
  }
  size_t steps = 0;
  for (const auto& f : r.formats) steps = std::max(steps, f.kl_per_step.size());
  for (size_t i = 0; i < r.formats.size(); ++i) {
    const auto& f = r.formats[i];
    o << "<polyline fill='none' stroke='" << colors[i % 3] << "' stroke-width='1.5' points='";
    for (size_t s = 0; s < f.kl_per_step.size(); ++s) {
      const double v = std::clamp(std::log10(std::max(f.kl_per_step[s], 1e-12)), lo, hi);
      o << x0 + plot_w * double(s) / double(std::max<size_t>(1, steps - 1)) << "," << y0 + plot_h * (hi - v) / (hi - lo) << " ";
    }
    o << "'/>\n<text x='" << x0 + 10 << "' y='" << y0 + 15 + 15 * double(i) << "' fill='" << colors[i % 3] << "'>"
      << wire::encoding_name(f.wire) << ": top-" << r.k << " agreement " << f.topk_agreement << "</text>\n";
  }
  o << "<text x='" << x0 + plot_w / 2 << "' y='" << y0 + plot_h + 30 << "' text-anchor='middle'>step</text>\n";
  // Bytes per token bars.
  const double bx = x0 + plot_w + 70, bw = 50;
  double max_bytes = 1;
  for (const auto& f : r.formats) max_bytes = std::max(max_bytes, f.bytes_sent_per_token + f.bytes_received_per_token);
  o << "<text x='" << bx << "' y='20' font-size='14'>bytes per token</text>\n";
  for (size_t i = 0; i < r.formats.size(); ++i) {
    const auto& f = r.formats[i];
    const double total = f.bytes_sent_per_token + f.bytes_received_per_token, h = plot_h * total / max_bytes;
    const double x = bx + double(i) * (bw + 20);
    o << "<rect x='" << x << "' y='" << y0 + plot_h - h << "' width='" << bw << "' height='" << h << "' fill='" << colors[i % 3] << "'/>\n"
      << "<text x='" << x + bw / 2 << "' y='" << y0 + plot_h + 15 << "' text-anchor='middle'>" << wire::encoding_name(f.wire) << "</text>\n"
      << "<text x='" << x + bw / 2 << "' y='" << y0 + plot_h - h - 5 << "' text-anchor='middle'>" << size_t(total) << "</text>\n";
  }
  o << "</svg>\n";
  return o.str();
}

}  // namespace larql
