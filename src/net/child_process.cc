#include "net/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <regex>
#include <thread>

#include "net/http_client.h"

namespace larql {

Result<SpawnedServer> spawn_server(const std::string& binary, const std::vector<std::string>& args,
                                   std::chrono::milliseconds deadline) {
  // posix_spawn rather than fork and exec: nothing runs in the child before exec (a forked
  // child of a threaded process must not allocate), and the pipe is close-on-exec, so that
  // children started later do not hold this one's stdout open. The dup2 onto stdout clears
  // the flag on the child's copy. Every other descriptor from 3 up is closed in the child:
  // Boost.Asio opens sockets without close-on-exec, and a child must not hold the
  // parent's connections or listeners open.
  std::vector<char*> argv{const_cast<char*>(binary.c_str())};
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) return make_error(ErrorCode::internal, std::string("pipe2() failed: ") + std::strerror(errno));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclosefrom_np(&actions, STDERR_FILENO + 1);
  pid_t pid = -1;
  const int spawned = posix_spawn(&pid, binary.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(out[1]);
  if (spawned != 0) {
    close(out[0]);
    return make_error(ErrorCode::internal, "cannot start " + binary + ": " + std::strerror(spawned));
  }
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
