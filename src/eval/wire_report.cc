#include "eval/wire_report.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "eval/link_model.h"

namespace larql {

using nlohmann::json;

namespace {

// Text as SVG (XML) character data: a model's name may hold any character.
std::string xml_text(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      default: out += c;
    }
  }
  return out;
}

}  // namespace

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
  json speculative = nullptr;
  if (r.speculative) {
    const auto& s = *r.speculative;
    const auto& c = s.cost;
    speculative = {{"draft", s.draft},
                   {"wire", wire::encoding_name(c.wire)},
                   {"tokens", s.tokens},
                   {"passes", s.passes},
                   {"drafted", s.drafted},
                   {"accepted", s.accepted},
                   {"acceptance", s.drafted ? double(s.accepted) / double(s.drafted) : 0.0},
                   {"tokens_per_pass", s.passes ? double(s.tokens) / double(s.passes) : 0.0},
                   {"same_ids", s.same_ids},
                   {"round_trips_per_token", c.round_trips_per_token},
                   {"bytes_sent_per_token", c.bytes_sent_per_token},
                   {"bytes_received_per_token", c.bytes_received_per_token},
                   {"ms_per_token", c.ms_per_token},
                   {"projected_tokens_per_second", c.projected_tokens_per_second}};
  }
  return {{"model", r.model},
          {"steps", r.steps},
          {"total_steps", r.total_steps},
          {"k", r.k},
          {"reference", r.local_reference ? "local" : "remote f32"},
          {"remote_f32_exact", r.remote_f32_exact},
          {"formats", formats},
          {"layers", layers},
          {"speculative", speculative},
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
  if (r.speculative) {
    const auto& s = *r.speculative;
    std::snprintf(line, sizeof line,
                  "\nspeculative (--draft %s, %s, greedy): %zu of %zu drafts kept, %.2f tokens per pass, %.2f round trips "
                  "per token, %s plain's ids; projected tokens/s:",
                  s.draft.c_str(), std::string(wire::encoding_name(s.cost.wire)).c_str(), s.accepted, s.drafted,
                  s.passes ? double(s.tokens) / double(s.passes) : 0.0, s.cost.round_trips_per_token,
                  s.same_ids ? "the same as" : "NOT");
    o << line;
    for (const auto& link : r.links) {
      std::snprintf(line, sizeof line, "  %s %.1f", link.name.c_str(), s.cost.projected_tokens_per_second.at(link.name));
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
  // One colour per format: the four encodings of a default run each get their own.
  constexpr std::array<const char*, 6> colors{"#1b7837", "#2166ac", "#b2182b", "#e08214", "#762a83", "#4d4d4d"};
  const auto color = [&](size_t i) { return colors[i % colors.size()]; };
  std::ostringstream o;
  o << "<svg xmlns='http://www.w3.org/2000/svg' width='" << W << "' height='" << H << "' font-family='sans-serif' font-size='12'>\n"
    << "<rect width='100%' height='100%' fill='white'/>\n"
    << "<text x='" << x0 << "' y='20' font-size='14'>" << xml_text(r.model) << ": KL(p_ref ‖ p_wire) per step (log10)</text>\n"
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
    o << "<polyline fill='none' stroke='" << color(i) << "' stroke-width='1.5' points='";
    for (size_t s = 0; s < f.kl_per_step.size(); ++s) {
      const double v = std::clamp(std::log10(std::max(f.kl_per_step[s], 1e-12)), lo, hi);
      o << x0 + plot_w * double(s) / double(std::max<size_t>(1, steps - 1)) << "," << y0 + plot_h * (hi - v) / (hi - lo) << " ";
    }
    o << "'/>\n<text x='" << x0 + 10 << "' y='" << y0 + 15 + 15 * double(i) << "' fill='" << color(i) << "'>"
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
    o << "<rect x='" << x << "' y='" << y0 + plot_h - h << "' width='" << bw << "' height='" << h << "' fill='" << color(i) << "'/>\n"
      << "<text x='" << x + bw / 2 << "' y='" << y0 + plot_h + 15 << "' text-anchor='middle'>" << wire::encoding_name(f.wire) << "</text>\n"
      << "<text x='" << x + bw / 2 << "' y='" << y0 + plot_h - h - 5 << "' text-anchor='middle'>" << size_t(total) << "</text>\n";
  }
  o << "</svg>\n";
  return o.str();
}

}  // namespace larql
