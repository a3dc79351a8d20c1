// Child processes for integration tests: a `larql` subcommand started on a free loopback
// port (--port 0; the port is read from its start-up line), waited for by polling
// /v1/health with a deadline, and always stopped (SIGTERM, then SIGKILL) when the test ends.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <regex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>

namespace larql::test {

class ChildProcess {
 public:
  // Runs LARQL_BINARY with `args`; waits until it prints "listening on http(s)://HOST:PORT".
  explicit ChildProcess(const std::vector<std::string>& args, std::chrono::seconds deadline = std::chrono::seconds(20)) {
    int out[2];
    if (pipe(out) != 0) throw std::runtime_error("pipe failed");
    pid_ = fork();
    if (pid_ == 0) {
      dup2(out[1], STDOUT_FILENO);
      close(out[0]);
      close(out[1]);
      std::vector<char*> argv{const_cast<char*>(LARQL_BINARY)};
      for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execv(LARQL_BINARY, argv.data());
      _exit(127);
    }
    close(out[1]);
    out_fd_ = out[0];
    const auto until = std::chrono::steady_clock::now() + deadline;
    std::string text;
    std::smatch m;
    const std::regex listening("listening on (https?)://([0-9.]+):([0-9]+)");
    while (!std::regex_search(text, m, listening)) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
      pollfd p{out_fd_, POLLIN, 0};
      if (left.count() <= 0 || poll(&p, 1, int(left.count())) <= 0) throw std::runtime_error("no start-up line: " + text);
      char buf[512];
      const ssize_t n = read(out_fd_, buf, sizeof buf);
      if (n <= 0) throw std::runtime_error("process exited before listening: " + text);
      text.append(buf, size_t(n));
    }
    startup_line_ = text;
    url_ = m[1].str() + "://" + m[2].str() + ":" + m[3].str();
    port_ = std::stoi(m[3].str());
  }
  ~ChildProcess() { stop(); }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  const std::string& url() const { return url_; }
  int port() const { return port_; }
  const std::string& startup_line() const { return startup_line_; }
  pid_t pid() const { return pid_; }

  // SIGTERM and wait (the server finishes in-flight work); SIGKILL after 10 s. Exit status.
  int stop() {
    if (pid_ <= 0) return exit_status_;
    kill(pid_, SIGTERM);
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

  void kill_now() {
    if (pid_ > 0) kill(pid_, SIGKILL);
  }

 private:
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
  httplib::Client client(url);
  const auto until = std::chrono::steady_clock::now() + deadline;
  while (std::chrono::steady_clock::now() < until) {
    if (auto res = client.Get("/v1/health"); res && res->status == 200) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

}  // namespace larql::test
