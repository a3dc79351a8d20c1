#include "model/weight_reader.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <utility>

#include "model/mapped_file.h"

namespace larql {

WeightReader::~WeightReader() {
  for (const auto& [file, fd] : fds_)
    if (fd >= 0) ::close(fd);
}

void WeightReader::read(const uint8_t* from, size_t bytes, uint8_t* to) {
  for (const auto& file : model_.files) {
    if (from < file->data() || from + bytes > file->data() + file->size()) continue;
    auto [it, added] = fds_.try_emplace(file.get(), -1);
    if (added) {
      it->second = ::open(file->path().c_str(), O_RDONLY | O_CLOEXEC);
      if (it->second >= 0 && !file->is(it->second)) ::close(std::exchange(it->second, -1));
    }
    size_t done = 0;
    const off_t offset = off_t(from - file->data());
    while (it->second >= 0 && done < bytes) {
      const ssize_t n = ::pread(it->second, to + done, bytes - done, offset + off_t(done));
      if (n <= 0) break;
      done += size_t(n);
    }
    if (done == bytes) return;
    break;
  }
  std::memcpy(to, from, bytes);
}

}  // namespace larql
