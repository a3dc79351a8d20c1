#include "net/child_process.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <regex>
#include <thread>

#include "net/http_client.h"

namespace larql {

Result<SpawnedServer> spawn_server(const std::string& binary, const std::vector<std::string>& args,
                                   std::chrono::milliseconds deadline) {
  int out[2];
  if (pipe(out) != 0) return make_error(ErrorCode::internal, "pipe() failed");
  const pid_t pid = fork();
  if (pid < 0) return make_error(ErrorCode::internal, "fork() failed");
  if (pid == 0) {
    dup2(out[1], STDOUT_FILENO);
    close(out[0]);
    close(out[1]);
    std::vector<char*> argv{const_cast<char*>(binary.c_str())};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(binary.c_str(), argv.data());
    _exit(127);
  }
  close(out[1]);
  SpawnedServer s{pid, "", "", out[0]};
  const auto until = std::chrono::steady_clock::now() + deadline;
  const std::regex listening("listening on (https?://[0-9.]+:[0-9]+)");
  std::smatch m;
  while (!std::regex_search(s.startup_text, m, listening)) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
    pollfd p{s.stdout_fd, POLLIN, 0};
    char buf[512];
    const ssize_t n = left.count() > 0 && poll(&p, 1, int(left.count())) > 0 ? read(s.stdout_fd, buf, sizeof buf) : 0;
    if (n <= 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
      close(s.stdout_fd);
      return make_error(ErrorCode::internal, binary + " did not print its listening line; it printed: " + s.startup_text);
    }
    s.startup_text.append(buf, size_t(n));
  }
  s.url = m[1].str();
  return s;
}

bool wait_healthy(const std::string& url, std::chrono::milliseconds deadline, const std::function<bool()>& keep_waiting) {
  auto client = HttpClient::open(url, {1000, std::nullopt});
  if (!client) return false;
  const auto until = std::chrono::steady_clock::now() + deadline;
  while (std::chrono::steady_clock::now() < until && (!keep_waiting || keep_waiting())) {
    if (auto res = (*client)->get("/v1/health"); res && res->status == 200) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // a polling interval, not a synchronisation
  }
  return false;
}

}  // namespace larql
