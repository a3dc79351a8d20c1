// A proxy in front of a real shard whose walk-ffn calls wait at a gate until the test
// opens it: a request that is provably in flight (for resharding while it runs) or a
// shard slower than the router's timeout. Stats and health pass straight through.
#pragma once

#include <httplib.h>

#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace larql::test {

class GatedProxy {
 public:
  // `rewrite_stats` may change the shard's /v1/stats text (e.g. to look like a reference
  // server); `open` starts with the gate open.
  explicit GatedProxy(const std::string& shard_url, std::function<std::string(std::string)> rewrite_stats = {},
                      bool open = false)
      : shard_url_(shard_url), open_(open) {
    auto pass = [this, rewrite_stats](const httplib::Request& req, httplib::Response& res) {
      httplib::Client c(shard_url_);
      auto r = c.Get(req.path.c_str());
      if (!r) return;
      const bool stats = req.path == "/v1/stats" && rewrite_stats;
      res.set_content(stats ? rewrite_stats(r->body) : r->body, r->get_header_value("Content-Type").c_str());
    };
    server_.Get("/v1/stats", pass);
    server_.Get("/v1/health", pass);
    server_.Post("/v1/walk-ffn", [this](const httplib::Request& req, httplib::Response& res) {
      {
        std::unique_lock lock(mutex_);
        ++waiting_;
        changed_.notify_all();
        changed_.wait(lock, [this] { return open_; });
        --waiting_;
      }
      httplib::Client c(shard_url_);
      httplib::Headers headers;
      for (const char* name : {"Accept", "Authorization", "X-Larql-Deadline-Ms"})
        if (req.has_header(name)) headers.emplace(name, req.get_header_value(name));
      {
        std::lock_guard lock(mutex_);
        last_deadline_ = req.has_header("X-Larql-Deadline-Ms") ? req.get_header_value("X-Larql-Deadline-Ms") : "(none)";
      }
      auto r = c.Post("/v1/walk-ffn", headers, req.body, req.get_header_value("Content-Type").c_str());
      if (!r) return;  // the client sees the connection end
      res.status = r->status;
      res.set_content(r->body, r->get_header_value("Content-Type").c_str());
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~GatedProxy() {
    open();
    server_.stop();
    thread_.join();
  }

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  // Waits (bounded) until `n` walk-ffn calls are held at the gate.
  bool wait_for_waiting(int n, std::chrono::seconds deadline = std::chrono::seconds(20)) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, deadline, [&] { return waiting_ >= n; });
  }
  // The X-Larql-Deadline-Ms of the last walk-ffn call, "(none)" without one, "" before any.
  std::string last_deadline() {
    std::lock_guard lock(mutex_);
    return last_deadline_;
  }
  void open() {
    std::lock_guard lock(mutex_);
    open_ = true;
    changed_.notify_all();
  }

 private:
  std::string shard_url_;
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mutex_;
  std::condition_variable changed_;
  int waiting_ = 0;
  std::string last_deadline_;
  bool open_ = false;
};

}  // namespace larql::test
