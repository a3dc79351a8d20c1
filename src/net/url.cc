#include "net/url.h"

#include <string_view>

namespace larql {

Result<Url> parse_url(const std::string& url) {
  Url u;
  std::string_view rest = url;
  if (rest.starts_with("http://")) {
    rest.remove_prefix(7);
  } else if (rest.starts_with("https://")) {
    rest.remove_prefix(8);
    u.tls = true;
  } else {
    return make_error(ErrorCode::invalid_argument, "URL '" + url + "' does not start with http:// or https://");
  }
  if (rest.ends_with('/')) rest.remove_suffix(1);
  if (rest.find('/') != std::string_view::npos)
    return make_error(ErrorCode::invalid_argument, "URL '" + url + "' has a path; expected http[s]://HOST[:PORT]");
  size_t colon = rest.rfind(':');
  if (rest.starts_with('[')) {  // [IPv6]:port
    const size_t close = rest.find(']');
    if (close == std::string_view::npos) return make_error(ErrorCode::invalid_argument, "URL '" + url + "': unclosed '['");
    u.host = std::string(rest.substr(1, close - 1));
    colon = close + 1 < rest.size() && rest[close + 1] == ':' ? close + 1 : std::string_view::npos;
  } else {
    u.host = std::string(rest.substr(0, colon));
  }
  u.port = colon == std::string_view::npos ? (u.tls ? "443" : "80") : std::string(rest.substr(colon + 1));
  if (u.host.empty() || u.port.empty() || u.port.find_first_not_of("0123456789") != std::string::npos)
    return make_error(ErrorCode::invalid_argument, "URL '" + url + "': expected http[s]://HOST[:PORT]");
  const bool ipv6 = u.host.find(':') != std::string::npos;
  u.host_header = (ipv6 ? "[" + u.host + "]" : u.host) + ":" + u.port;
  return u;
}

}  // namespace larql
