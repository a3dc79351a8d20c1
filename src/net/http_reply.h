// What a route answers, before the HTTP layer frames it: status, body and headers. Error
// bodies follow PROTOCOL §7; every string in them may come from a peer, so JSON text is
// always written with invalid UTF-8 replaced (nlohmann's dump() would throw on it).
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/errors.h"

namespace larql {

// Writes one piece of a streamed body; false once the client is gone (then stop).
using StreamSend = std::function<bool(std::string_view)>;

struct HttpReply {
  int status = 200;
  std::string content_type;
  std::string body;
  int retry_after_s = 0;         // > 0: a Retry-After header with these seconds (503)
  std::vector<std::pair<std::string, std::string>> headers = {};  // extra response headers
  // Set for a streamed body (Server-Sent Events): the headers go out at once, then each
  // piece `stream` sends as an HTTP/1.1 chunk; `body` is ignored.
  std::function<void(const StreamSend& send)> stream = {};
};

// The header a caller states its deadline in: the milliseconds it will still wait (PROTOCOL §9).
inline constexpr const char* kDeadlineHeader = "X-Larql-Deadline-Ms";

// JSON text that never throws: invalid UTF-8 in any string becomes U+FFFD.
std::string json_text(const nlohmann::json& j);

// 200 with a JSON document.
HttpReply json_reply(const nlohmann::json& j);

// 200 with Prometheus text (a /metrics page).
HttpReply metrics_reply(std::string text);

// The JSON error body of PROTOCOL §7 with the code's status.
HttpReply error_reply(const Error& e);

}  // namespace larql
