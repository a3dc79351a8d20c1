// spawn_server: a child's start-up line found, a binary that cannot start named in the
// error, and no child holding another child's stdout pipe open.
#include "net/child_process.h"

#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>

namespace larql {
namespace {

using namespace std::chrono_literals;

// Everything the child writes after its start-up line, up to its exit (EOF on the pipe).
std::string rest_of_output(SpawnedServer& s) {
  std::string out;
  char buf[256];
  for (ssize_t n; (n = read(s.stdout_fd, buf, sizeof buf)) > 0;) out.append(buf, size_t(n));
  close(s.stdout_fd);
  waitpid(s.pid, nullptr, 0);
  return out;
}

TEST(SpawnServer, FindsTheListeningLineAndTheUrlInIt) {
  auto s = spawn_server("/bin/sh", {"-c", "echo starting; echo 'listening on http://127.0.0.1:4321'; echo done"}, 10s);
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->url, "http://127.0.0.1:4321");
  EXPECT_NE(s->startup_text.find("starting"), std::string::npos);
  const std::string rest = rest_of_output(*s);
  EXPECT_NE((s->startup_text + rest).find("done"), std::string::npos);
}

TEST(SpawnServer, ABinaryThatCannotStartIsNamedInTheError) {
  auto s = spawn_server("/nonexistent/larql-missing", {"serve"}, 10s);
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("/nonexistent/larql-missing"), std::string::npos) << s.error().message;
}

TEST(SpawnServer, AChildWithoutTheLineIsReportedWithWhatItPrinted) {
  auto s = spawn_server("/bin/sh", {"-c", "echo no port for you"}, 10s);
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("no port for you"), std::string::npos) << s.error().message;
}

// The first child's stdout pipe is close-on-exec: the second child does not inherit its read
// end (nor would a third its write end, which would keep the first's EOF from arriving).
TEST(SpawnServer, ChildrenDoNotInheritEachOthersPipes) {
  auto first = spawn_server("/bin/sh", {"-c", "echo 'listening on http://127.0.0.1:1'; exec sleep 30"}, 10s);
  ASSERT_TRUE(first) << first.error().message;
  const std::string fd = std::to_string(first->stdout_fd);
  auto second = spawn_server(
      "/bin/sh", {"-c", "echo 'listening on http://127.0.0.1:2'; if [ -e /proc/self/fd/" + fd + " ]; then echo inherited; fi"}, 10s);
  ASSERT_TRUE(second) << second.error().message;
  EXPECT_EQ(rest_of_output(*second).find("inherited"), std::string::npos) << "fd " << fd << " was open in the second child";
  kill(first->pid, SIGKILL);
  rest_of_output(*first);
}

TEST(SpawnServer, ChildrenDoNotInheritDescriptorsOpenedWithoutCloseOnExec) {
  const int leaky = open("/dev/null", O_RDONLY);  // as Boost.Asio opens its sockets
  ASSERT_GE(leaky, 3);
  const std::string fd = std::to_string(leaky);
  auto child = spawn_server(
      "/bin/sh", {"-c", "echo 'listening on http://127.0.0.1:3'; if [ -e /proc/self/fd/" + fd + " ]; then echo inherited; fi"}, 10s);
  close(leaky);
  ASSERT_TRUE(child) << child.error().message;
  EXPECT_EQ(rest_of_output(*child).find("inherited"), std::string::npos) << "fd " << fd << " was open in the child";
}

}  // namespace
}  // namespace larql
