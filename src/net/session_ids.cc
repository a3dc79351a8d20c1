#include "net/session_ids.h"

#include <openssl/evp.h>
#include <sys/random.h>

namespace larql {

wire::SessionId new_session_id(const std::function<bool(const wire::SessionId&)>& taken) {
  for (;;) {
    wire::SessionId id;
    size_t got = 0;
    while (got < id.size()) {
      const ssize_t n = getrandom(id.data() + got, id.size() - got, 0);
      if (n > 0) got += size_t(n);
    }
    if (!taken(id)) return id;
  }
}

std::string authorization_hash(std::string_view authorization) {
  if (authorization.empty()) return {};
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_Digest(authorization.data(), authorization.size(), digest, &length, EVP_sha256(), nullptr);
  return std::string(reinterpret_cast<const char*>(digest), length);
}

}  // namespace larql
