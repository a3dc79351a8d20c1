#include "loadtest/loopback.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>

namespace larql::loadtest {

bool resolves_to_loopback_only(const std::string& host) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0) return false;
  bool all = found != nullptr;
  for (addrinfo* a = found; a; a = a->ai_next) {
    if (a->ai_family == AF_INET)
      all &= (ntohl(reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_addr.s_addr) >> 24) == 127;
    else if (a->ai_family == AF_INET6)
      all &= IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<sockaddr_in6*>(a->ai_addr)->sin6_addr);
    else
      all = false;
  }
  freeaddrinfo(found);
  return all;
}

}  // namespace larql::loadtest
