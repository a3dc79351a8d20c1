// One place that sets up outgoing HTTP connections (client to shard, router to shard):
// keep-alive, TCP_NODELAY, and the same timeout for connect, read and write.
#pragma once

#include <httplib.h>

#include <memory>
#include <string>

namespace larql {

inline std::unique_ptr<httplib::Client> make_http_client(const std::string& url, int timeout_ms) {
  auto client = std::make_unique<httplib::Client>(url);
  client->set_keep_alive(true);
  client->set_tcp_nodelay(true);
  const time_t sec = timeout_ms / 1000;
  const time_t usec = (timeout_ms % 1000) * 1000;
  client->set_connection_timeout(sec, usec);
  client->set_read_timeout(sec, usec);
  client->set_write_timeout(sec, usec);
  return client;
}

}  // namespace larql
