// A server's base URL as every larql client takes it: http[s]://HOST[:PORT], no path.
#pragma once

#include <string>

#include "base/errors.h"

namespace larql {

struct Url {
  bool tls = false;
  std::string host, port;
  std::string host_header;  // host:port, an IPv6 host in brackets
};

Result<Url> parse_url(const std::string& url);

}  // namespace larql
