// The pages the servers show at / (web/*.html: larql api's chat, the router's grid view),
// embedded in the binary when it is built: one self-contained file each, nothing fetched
// from elsewhere.
#pragma once

#include <string_view>

#include "net/http_reply.h"

namespace larql {

// web/NAME.html's text; empty when there is no such page.
std::string_view web_page(std::string_view name);

// The page as a reply (text/html; a 404 when it is missing from the build).
inline HttpReply web_page_reply(std::string_view name) {
  const std::string_view page = web_page(name);
  if (page.empty()) return {404, "text/plain", "no page " + std::string(name) + " in this build"};
  return {200, "text/html; charset=utf-8", std::string(page)};
}

}  // namespace larql
