// A read-only memory map of a weight file. Weights are used in place: pages are read
// from disk when first touched, so a shard server that owns half the layers only ever
// brings half the FFN weights into memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include <sys/types.h>

#include "base/errors.h"

namespace larql {

class MappedFile {
 public:
  static Result<std::shared_ptr<MappedFile>> open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // Whether fd is open on the file this maps (not one since put in its place).
  bool is(int fd) const;

 private:
  MappedFile(std::string path, const uint8_t* data, size_t size, dev_t device, ino_t inode)
      : path_(std::move(path)), data_(data), size_(size), device_(device), inode_(inode) {}
  std::string path_;
  const uint8_t* data_;
  size_t size_;
  dev_t device_;
  ino_t inode_;
};

}  // namespace larql
