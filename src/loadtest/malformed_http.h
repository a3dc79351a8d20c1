// The malformed-HTTP corpus `larql loadtest --malformed` replays: requests no HTTP
// library would send (broken request lines, non-UTF-8 bytes, 64 KiB–1 MiB heads, bad and
// overflowing Content-Length, Content-Length with Transfer-Encoding, bad chunk sizes, short
// bodies, a head trickled a byte at a time), each on its own connection. A server passes a
// case when it answers 4xx or closes the connection, and then still serves a valid request.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "base/errors.h"

namespace larql::loadtest {

enum class SendMode {
  all_at_once,
  half_close,  // then shut down our side: the body the head announced never comes
  trickle,     // one byte at a time, until the server answers
};

struct MalformedCase {
  std::string kind;  // the corpus class, e.g. "content-length"
  std::string name;  // the case within it, e.g. "overflowing"
  std::string bytes;
  SendMode mode = SendMode::all_at_once;
  // Legal HTTP a server may serve (bytes 0x80-0xFF are obs-text in a header value it does
  // not read): a 2xx passes too.
  bool may_succeed = false;
};

// Every case, addressed to `host_header` (HOST:PORT, as the Host header carries it).
std::vector<MalformedCase> malformed_http_corpus(const std::string& host_header);

// What came back on the connection: a status code, or the connection closed (or reset)
// without one, or nothing before the timeout.
struct RawAnswer {
  enum class Kind { status, closed, timeout, connect_failed } kind = Kind::timeout;
  int status = 0;
  std::string describe() const;
  bool refused() const { return kind == Kind::closed || (kind == Kind::status && status / 100 == 4); }
};

// Whether `answer` passes `c`: refused, or served where that is legal.
bool acceptable(const MalformedCase& c, const RawAnswer& answer);

struct RawExchangeOptions {
  std::chrono::milliseconds answer_timeout{15000};
  std::chrono::milliseconds trickle_interval{100};
};

// Sends `c` to host:port over plain TCP and reads the status line of the answer.
RawAnswer raw_exchange(const std::string& host, const std::string& port, const MalformedCase& c,
                       const RawExchangeOptions& options);

}  // namespace larql::loadtest
