#include "eval/link_model.h"

#include <cmath>
#include <cstdlib>
#include <sstream>
#include <utility>

namespace larql {

const std::vector<Link>& what_if_links() {
  static const std::vector<Link> links{{"1Gbit_0.2ms", 1000, 0.2}, {"100Mbit_2ms", 100, 2}, {"10Mbit_20ms", 10, 20}};
  return links;
}

Result<std::vector<Link>> parse_links(const std::string& text) {
  std::vector<Link> links;
  std::stringstream parts(text);
  for (std::string part; std::getline(parts, part, ',');) {
    auto fail = [&] {
      return make_error(ErrorCode::invalid_argument,
                        "link '" + part + "': expected RATE/RTT such as 100Mbit/2ms (rate in Gbit, Mbit or kbit)");
    };
    const size_t slash = part.find('/');
    if (slash == std::string::npos || !part.ends_with("ms")) return fail();
    const std::string rate = part.substr(0, slash), rtt = part.substr(slash + 1, part.size() - slash - 3);
    double scale = 0;
    for (auto [unit, mbit] : {std::pair{"Gbit", 1000.0}, {"Mbit", 1.0}, {"kbit", 0.001}})
      if (rate.ends_with(unit)) scale = mbit;
    char* end = nullptr;
    const double number = std::strtod(rate.c_str(), &end);
    if (scale == 0 || end != rate.c_str() + rate.size() - 4 || !(number > 0)) return fail();
    const double ms = std::strtod(rtt.c_str(), &end);
    if (rtt.empty() || end != rtt.c_str() + rtt.size() || !(ms >= 0)) return fail();
    links.push_back({rate + "_" + rtt + "ms", number * scale, ms});
  }
  if (links.empty()) return make_error(ErrorCode::invalid_argument, "no links given; expected e.g. 100Mbit/2ms");
  return links;
}

double framed_bytes(double payload, double messages) {
  if (messages <= 0) return payload;
  const double segments_per_message = std::ceil(payload / messages / kSegmentPayload);
  return payload + messages * segments_per_message * kFramingPerSegment;
}

double projected_ms_per_token(const LinkTraffic& t, const Link& link) {
  const double bytes = framed_bytes(t.body_bytes_sent + t.head_bytes_sent, t.round_trips) +
                       framed_bytes(t.body_bytes_received + t.head_bytes_received, t.round_trips);
  return t.local_ms + t.server_ms + t.transport_ms + t.round_trips * link.rtt_ms + bytes * 8.0 / (link.megabits_per_second * 1000.0);
}

}  // namespace larql
