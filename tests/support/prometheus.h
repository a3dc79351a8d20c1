// Reading a server's GET /metrics page in tests.
#pragma once

#include <httplib.h>

#include <regex>
#include <sstream>
#include <string>

namespace larql::test {

// The sum of a metric over all its labels, e.g. every larql_shard_compute_ms_count{...}.
inline double metric_sum(const std::string& page, const std::string& name) {
  double sum = 0;
  const std::regex line("^" + name + R"((\{[^}]*\})? ([0-9.e+-]+)$)");
  std::smatch m;
  std::istringstream in(page);
  for (std::string l; std::getline(in, l);)
    if (std::regex_match(l, m, line)) sum += std::stod(m[2]);
  return sum;
}

// The same read from a live server at `url`; -1 when it does not answer.
inline double server_metric(const std::string& url, const std::string& name, const std::string& key = "") {
  httplib::Client c(url);
  if (!key.empty()) c.set_bearer_token_auth(key);
  auto res = c.Get("/metrics");
  return res && res->status == 200 ? metric_sum(res->body, name) : -1;
}

}  // namespace larql::test
