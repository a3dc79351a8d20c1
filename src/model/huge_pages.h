// Weights on transparent huge pages. Weights are used in place in their file mappings,
// whose 4 KiB pages cost a TLB miss (a two-level page walk in a VM) per page streamed
// through: a step of decode reads every weight once. Copying the weights a process computes
// with into one anonymous region of 2 MiB pages removes most of those walks (measured in
// docs/benchmarks/history.md). The file is then only read once, with pread: the mapping's pages
// of the copied weights are never touched.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "model/model.h"

namespace larql {

// The weights one process computes with.
enum class WeightsUsed {
  all,          // a local run: every matrix
  all_but_ffn,  // a client whose FFN is remote: all but gate, up and down
  ffn,          // a shard: gate, up, down, router and owned experts of layers [first, last] only
  layers,       // a session shard: every matrix of layers [first, last], and the globals they read
  head,         // a client of session shards: the embedding, the final norm and the classifier
};

struct HugePagePlacement {
  WeightsUsed used = WeightsUsed::all;
  size_t first = 0, last = 0;     // the FFN layers, for WeightsUsed::ffn
  size_t min_bytes = 64u << 20;   // below this the weights fit the TLB's reach: keep the mapping
  // Above this share of the memory available (MemAvailable) the copy could run the machine
  // out of memory where the mapping would only page: keep the mapping.
  double max_share_of_available = 0.5;
  size_t first_expert = 0, last_expert = SIZE_MAX;  // the owned experts of those layers, for WeightsUsed::ffn
};

// Owns the anonymous region the weights were copied into.
class HugePageRegion {
 public:
  // At least `bytes` from begin(), which is 2 MiB aligned, asked to be on huge pages.
  static Result<std::shared_ptr<HugePageRegion>> allocate(size_t bytes);
  HugePageRegion(void* data, size_t bytes) : data_(data), bytes_(bytes) {}
  ~HugePageRegion();
  HugePageRegion(const HugePageRegion&) = delete;
  HugePageRegion& operator=(const HugePageRegion&) = delete;
  size_t bytes() const { return bytes_; }  // the mapping's, alignment included
  uint8_t* begin() const;
  void make_read_only();

 private:
  void* data_;
  size_t bytes_;
};

// Whether the kernel gives huge pages to a region that asks (THP "always" or "madvise").
bool huge_pages_available();

// /proc/meminfo's MemAvailable in bytes (0 when unknown).
size_t memory_available_bytes();

// Copies the used weights into huge pages and points the model's matrices there; the region
// is kept in model.huge_pages. Returns the bytes copied: 0 when huge pages are unavailable,
// the weights are fewer than min_bytes or more than the memory allows, or the model was
// placed before (the model is then left as it was).
Result<size_t> place_on_huge_pages(Model& model, const HugePagePlacement& placement);

}  // namespace larql
