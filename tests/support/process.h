// Child processes for integration tests: a `larql` subcommand started on a free loopback
// port (--port 0; the port is read from its start-up line), waited for by polling
// /v1/health with a deadline, and always stopped (SIGTERM, then SIGKILL) when the test ends.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "net/child_process.h"

namespace larql::test {

class ChildProcess {
 public:
  // Runs LARQL_BINARY with `args`; waits until it prints "listening on http(s)://HOST:PORT".
  explicit ChildProcess(const std::vector<std::string>& args, std::chrono::seconds deadline = std::chrono::seconds(20)) {
    auto s = spawn_server(LARQL_BINARY, args, deadline);
    if (!s) throw std::runtime_error(s.error().message);
    pid_ = s->pid;
    out_fd_ = s->stdout_fd;
    startup_line_ = s->startup_text;
    url_ = s->url;
    port_ = std::stoi(url_.substr(url_.rfind(':') + 1));
  }
  ~ChildProcess() { stop(); }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  const std::string& url() const { return url_; }
  int port() const { return port_; }
  const std::string& startup_line() const { return startup_line_; }
  pid_t pid() const { return pid_; }

  // SIGTERM and wait (the server finishes in-flight work); SIGKILL after 10 s. Exit status.
  int stop() { return stop_with(SIGTERM); }
  // The same with SIGINT, as Ctrl-C in a terminal sends it.
  int interrupt() { return stop_with(SIGINT); }

  void kill_now() {
    if (pid_ > 0) kill(pid_, SIGKILL);
  }

 private:
  int stop_with(int signal) {
    if (pid_ <= 0) return exit_status_;
    kill(pid_, signal);
    exit_status_ = wait_for_exit(std::chrono::seconds(10));
    if (exit_status_ == -1) {
      kill(pid_, SIGKILL);
      exit_status_ = wait_for_exit(std::chrono::seconds(10));
    }
    pid_ = -1;
    if (out_fd_ >= 0) close(out_fd_);
    out_fd_ = -1;
    return exit_status_;
  }

  int wait_for_exit(std::chrono::seconds deadline) {
    const auto until = std::chrono::steady_clock::now() + deadline;
    while (std::chrono::steady_clock::now() < until) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      std::this_thread::sleep_for(std::chrono::milliseconds(10));  // polling a child's exit, not synchronising on time
    }
    return -1;
  }

  pid_t pid_ = -1;
  int out_fd_ = -1;
  std::string url_, startup_line_;
  int port_ = 0;
  int exit_status_ = -1;
};

// Polls GET /v1/health until it answers 200 or the deadline passes.
inline bool wait_healthy(const std::string& url, std::chrono::seconds deadline = std::chrono::seconds(10)) {
  return larql::wait_healthy(url, deadline);
}

}  // namespace larql::test
