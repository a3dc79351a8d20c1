// What a decoded token costs over a network link, from what one run on any link measured:
// local and server compute, the stacks' own per-call time, round trips, and the bytes each
// direction carries — HTTP heads and bodies, cut into TCP segments that each carry
// Ethernet, IP and TCP framing. `larql bench` projects tokens/s with it; bench/link_proxy
// emulates links with the same framing; bench/link_decode.py compares the two.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "base/errors.h"

namespace larql {

struct Link {
  std::string name;  // "100Mbit_2ms"
  double megabits_per_second;
  double rtt_ms;
};
const std::vector<Link>& what_if_links();
// "1Gbit/0.2ms,100Mbit/2ms,10Mbit/20ms": a rate in Gbit, Mbit or kbit per second and a
// round-trip time in ms per link. The error names the part.
Result<std::vector<Link>> parse_links(const std::string& text);

// TCP payload per segment (1500-byte MTU, IPv4, TCP timestamps) and the framing each
// segment adds on an Ethernet link: TCP 32 + IP 20 + Ethernet 18 + preamble and gap 20.
inline constexpr double kSegmentPayload = 1448, kFramingPerSegment = 90;

// Bytes on the link for `messages` messages of `payload` bytes in all (heads and bodies).
double framed_bytes(double payload, double messages);

// Per decoded token.
struct LinkTraffic {
  double local_ms = 0, server_ms = 0;
  double transport_ms = 0;  // the calls' time beyond the servers' compute, where it was measured
  double round_trips = 0;
  double body_bytes_sent = 0, body_bytes_received = 0;
  double head_bytes_sent = 0, head_bytes_received = 0;
};

double projected_ms_per_token(const LinkTraffic& t, const Link& link);

inline constexpr const char* kProjectionFormula =
    "tokens/s = 1000 / (local_ms + server_ms + transport_ms + round_trips × RTT_ms + link_bytes × 8 / (Mbit/s × 1000)), "
    "all per token; link_bytes = HTTP heads and bodies both ways plus 90 bytes of Ethernet/IP/TCP framing per 1448-byte "
    "segment; transport_ms is the measuring run's own (loopback: the stacks' per-call time)";

}  // namespace larql
