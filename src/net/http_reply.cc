#include "net/http_reply.h"

namespace larql {

std::string json_text(const nlohmann::json& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

HttpReply json_reply(const nlohmann::json& j) { return {200, "application/json", json_text(j)}; }

HttpReply metrics_reply(std::string text) { return {200, "text/plain; version=0.0.4", std::move(text)}; }

HttpReply error_reply(const Error& e) {
  return {http_status(e.code), "application/json",
          json_text({{"error", e.message}, {"code", error_code_name(e.code)}}), e.code == ErrorCode::overloaded ? 1 : 0};
}

}  // namespace larql
