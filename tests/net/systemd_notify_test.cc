#include "net/systemd_notify.h"

#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "support/demo_model.h"
#include "support/process.h"

namespace larql {
namespace {

// A datagram socket standing in for systemd's: bound to `name` (a path, or "@name" for an
// abstract one), read with a deadline.
class NotifySocket {
 public:
  explicit NotifySocket(const std::string& name) {
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::memcpy(a.sun_path, name.data(), name.size());
    if (a.sun_path[0] == '@') a.sun_path[0] = '\0';
    bound_ = ::bind(fd_, reinterpret_cast<sockaddr*>(&a), socklen_t(offsetof(sockaddr_un, sun_path) + name.size())) == 0;
  }
  ~NotifySocket() { ::close(fd_); }
  bool bound() const { return bound_; }
  // The next datagram, or "" when none came within `ms`.
  std::string next(int ms) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, ms) != 1) return {};
    char buf[256];
    const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    return n > 0 ? std::string(buf, size_t(n)) : std::string();
  }

 private:
  int fd_ = -1;
  bool bound_ = false;
};

TEST(SystemdNotify, SendsToAPathOrAnAbstractSocketAndNothingWithout) {
  const std::string path = (std::filesystem::temp_directory_path() / ("larql-notify-" + std::to_string(::getpid()))).string();
  std::filesystem::remove(path);
  {
    NotifySocket s(path);
    ASSERT_TRUE(s.bound());
    ::setenv("NOTIFY_SOCKET", path.c_str(), 1);
    EXPECT_TRUE(notify_systemd("READY=1"));
    EXPECT_EQ(s.next(5000), "READY=1");
  }
  std::filesystem::remove(path);
  const std::string abstract = "@larql-notify-" + std::to_string(::getpid());
  NotifySocket s(abstract);
  ASSERT_TRUE(s.bound());
  ::setenv("NOTIFY_SOCKET", abstract.c_str(), 1);
  EXPECT_TRUE(notify_systemd("STOPPING=1"));
  EXPECT_EQ(s.next(5000), "STOPPING=1");
  ::unsetenv("NOTIFY_SOCKET");
  EXPECT_FALSE(notify_systemd("READY=1")) << "not under systemd: nothing to send to";
}

// A server under a Type=notify unit: READY=1 once it listens, STOPPING=1 when told to stop.
TEST(SystemdNotify, AServerSaysReadyOnceItListensAndStoppingWhenStopped) {
  const std::string abstract = "@larql-notify-serve-" + std::to_string(::getpid());
  NotifySocket s(abstract);
  ASSERT_TRUE(s.bound());
  ::setenv("NOTIFY_SOCKET", abstract.c_str(), 1);
  test::ChildProcess shard({"serve", test::kDemo, "--port", "0", "--threads", "1"});
  ::unsetenv("NOTIFY_SOCKET");
  EXPECT_EQ(s.next(10000), "READY=1");
  EXPECT_EQ(shard.stop(), 0);
  EXPECT_EQ(s.next(10000), "STOPPING=1");
}

}  // namespace
}  // namespace larql
