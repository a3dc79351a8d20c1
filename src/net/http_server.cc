#include "net/http_server.h"

#include <httplib.h>
#include <openssl/crypto.h>
#include <pthread.h>
#include <signal.h>

#include <iostream>
#include <set>
#include <thread>

namespace larql {
namespace {

void send(httplib::Response& res, const HttpReply& reply) {
  res.status = reply.status;
  res.set_content(reply.body, reply.content_type.c_str());
  if (reply.retry_after) res.set_header("Retry-After", "1");
  for (const auto& [name, value] : reply.headers) res.set_header(name, value);
}

}  // namespace

bool bearer_key_matches(const std::string& authorization, const std::string& key) {
  const std::string expected = "Bearer " + key;
  // Constant time in the key's length: the comparison does not stop at the first difference.
  return authorization.size() == expected.size() && CRYPTO_memcmp(authorization.data(), expected.data(), expected.size()) == 0;
}

void block_termination_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

int serve_http(const std::vector<Route>& routes, const HttpServerOptions& o, const std::string& describe) {
  std::unique_ptr<httplib::Server> server;
  if (o.tls_cert || o.tls_key) {
    if (!o.tls_cert || !o.tls_key) {
      std::cerr << "larql: --tls-cert and --tls-key go together\n";
      return 2;
    }
    auto tls = std::make_unique<httplib::SSLServer>(o.tls_cert->c_str(), o.tls_key->c_str());
    if (!tls->is_valid()) {
      std::cerr << "larql: cannot use TLS certificate " << *o.tls_cert << " with key " << *o.tls_key << "\n";
      return 2;
    }
    server = std::move(tls);
  } else {
    server = std::make_unique<httplib::Server>();
  }
  httplib::Server& svr = *server;
  const size_t threads = o.http_threads;
  svr.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  svr.set_keep_alive_max_count(1u << 30);  // the default closes a connection after 5 requests
  // An idle keep-alive connection holds a worker until this timeout, and stop() waits for
  // it: short, so SIGTERM ends the server within seconds. Clients reconnect transparently.
  svr.set_keep_alive_timeout(2);
  svr.set_tcp_nodelay(true);
  svr.set_payload_max_length(o.max_body_bytes);

  std::set<std::string> known_paths;
  for (const auto& r : routes) known_paths.insert(r.path);
  svr.set_pre_routing_handler([&](const httplib::Request& req, httplib::Response& res) {
    if (o.api_key && req.path != "/v1/health" && !bearer_key_matches(req.get_header_value("Authorization"), *o.api_key)) {
      send(res, error_reply(make_error(ErrorCode::unauthorized, "missing or wrong Authorization: Bearer key")));
      return httplib::Server::HandlerResponse::Handled;
    }
    bool method_known = false;
    for (const auto& r : routes) method_known |= r.path == req.path && r.method == req.method;
    if (known_paths.count(req.path) && !method_known) {
      send(res, error_reply(make_error(ErrorCode::method_not_allowed, req.method + " is not allowed on " + req.path)));
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  for (const auto& r : routes) {
    auto handler = [h = r.handler](const httplib::Request& req, httplib::Response& res) {
      send(res, h(req.body, req.get_header_value("Content-Type"), req.get_header_value("Accept"),
                  req.get_header_value("Authorization")));
    };
    if (r.method == "GET") svr.Get(r.path, handler);
    else svr.Post(r.path, handler);
  }
  svr.set_error_handler([&](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    if (res.status == 404) send(res, error_reply(make_error(ErrorCode::not_found, "no such path: " + req.path)));
    else if (res.status == 413)
      send(res, error_reply(make_error(ErrorCode::body_too_large, "body above the limit of " + std::to_string(o.max_body_bytes) + " bytes")));
    else if (res.status >= 400) send(res, error_reply(make_error(ErrorCode::invalid_json, "bad request")));
  });
  svr.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unexpected failure";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    send(res, error_reply(make_error(ErrorCode::internal, what)));
  });

  int port = o.port;
  if (port == 0) {
    port = svr.bind_to_any_port(o.host);
    if (port < 0) {
      std::cerr << "larql: cannot bind " << o.host << "\n";
      return 2;
    }
  } else if (!svr.bind_to_port(o.host, port)) {
    std::cerr << "larql: cannot bind " << o.host << ":" << port << " (in use?)\n";
    return 2;
  }
  std::cout << describe << ", listening on " << (o.tls_cert ? "https" : "http") << "://" << o.host << ":" << port
            << std::endl;

  // SIGINT/SIGTERM arrive here (block_termination_signals() made every other thread ignore
  // them); stop() lets in-flight requests finish before listen_after_bind() returns.
  std::thread signals([&svr] {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    int sig = 0;
    sigwait(&set, &sig);
    svr.stop();
  });
  const bool ok = svr.listen_after_bind();
  pthread_kill(signals.native_handle(), SIGTERM);  // release the signal thread if the server ended by itself
  signals.join();
  std::cerr << "larql: server stopped\n";
  return ok ? 0 : 1;
}

}  // namespace larql
