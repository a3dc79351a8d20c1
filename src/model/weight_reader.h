// Reads a model's weight bytes without mapping them into the process: with pread from the
// file mapped at their address. Touching a mapping faults in whole page-cache folios (up
// to megabytes with large folios), so a shard that reads a few KiB of every expert (its
// fingerprints) or copies its own experts elsewhere (huge_pages.h) would otherwise hold
// pages of weights it never computes with.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>

#include "model/model.h"

namespace larql {

class WeightReader {
 public:
  explicit WeightReader(const Model& model) : model_(model) {}
  ~WeightReader();
  WeightReader(const WeightReader&) = delete;
  WeightReader& operator=(const WeightReader&) = delete;
  // `bytes` at `from` into `to`: from the file mapped there, or from memory for weights in
  // no file (or a file that is no longer the one mapped).
  void read(const uint8_t* from, size_t bytes, uint8_t* to);

 private:
  const Model& model_;
  std::map<const MappedFile*, int> fds_;  // -1: the file could not be opened as the one mapped
};

}  // namespace larql
