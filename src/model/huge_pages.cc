#include "model/huge_pages.h"

#include "model/weight_reader.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace larql {
namespace {

constexpr size_t kHugePage = 2u << 20;
constexpr size_t kAlign = 64;  // every matrix starts on a cache line

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

std::vector<Matrix*> used_matrices(Model& model, const HugePagePlacement& p) {
  std::vector<Matrix*> out;
  if (p.used == WeightsUsed::ffn) {
    for (size_t i = p.first; i <= p.last && i < model.layers.size(); ++i) {
      LayerWeights& l = model.layers[i];
      out.insert(out.end(), {&l.gate, &l.up, &l.down, &l.router});
      for (size_t e = p.first_expert; e <= p.last_expert && e < l.experts.size(); ++e)
        out.insert(out.end(), {&l.experts[e].gate, &l.experts[e].up, &l.experts[e].down});
    }
  } else if (p.used == WeightsUsed::layers) {
    for (size_t i = p.first; i <= p.last && i < model.layers.size(); ++i)
      model.layers[i].for_each_matrix([&](Matrix& m) { out.push_back(&m); });
    out.push_back(&model.rope_freqs);
    if (model.config.ple_dim) out.insert(out.end(), {&model.embed, &model.ple_model_proj, &model.ple_proj_norm});
  } else if (p.used == WeightsUsed::head) {
    out = {&model.embed, &model.final_norm, &model.classifier};
  } else {
    std::set<const Matrix*> left_out;  // the FFN, for a client whose FFN is remote
    if (p.used == WeightsUsed::all_but_ffn)
      for (LayerWeights& l : model.layers)
        for (Matrix* m : l.ffn()) left_out.insert(m);
    // Gemma 4's per-layer embedding table (GBs for the E models) is read one row per token
    // and layer: it stays mapped, as a few rows of it are all a token touches.
    left_out.insert(&model.ple_embed);
    model.for_each_matrix([&](Matrix& m) {
      if (!left_out.count(&m)) out.push_back(&m);
    });
  }
  // Weights a loader converted (Model::converted) are in anonymous memory on huge pages
  // already: a copy would only hold them twice.
  auto in_a_file = [&](const Matrix* m) {
    const auto* p = static_cast<const uint8_t*>(m->data);
    for (const auto& f : model.files)
      if (p >= f->data() && p < f->data() + f->size()) return true;
    return false;
  };
  std::erase_if(out, [&](const Matrix* m) { return m->data == nullptr || m->bytes() == 0 || !in_a_file(m); });
  return out;
}

}  // namespace

Result<std::shared_ptr<HugePageRegion>> HugePageRegion::allocate(size_t bytes) {
  // Over-allocate by one huge page so the region can start on a 2 MiB boundary.
  const size_t length = round_up(bytes, kHugePage) + kHugePage;
  void* raw = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED)
    return make_error(ErrorCode::internal, "cannot allocate " + std::to_string(bytes >> 20) +
                                               " MiB for the weights on huge pages: " + std::strerror(errno));
  auto region = std::make_shared<HugePageRegion>(raw, length);
  madvise(region->begin(), length - kHugePage, MADV_HUGEPAGE);  // a hint: without it the region still works
  return region;
}

uint8_t* HugePageRegion::begin() const {
  return reinterpret_cast<uint8_t*>(round_up(reinterpret_cast<uintptr_t>(data_), kHugePage));
}

void HugePageRegion::make_read_only() { mprotect(begin(), bytes_ - kHugePage, PROT_READ); }

HugePageRegion::~HugePageRegion() { munmap(data_, bytes_); }

bool huge_pages_available() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  std::getline(f, line);
  return line.find("[always]") != std::string::npos || line.find("[madvise]") != std::string::npos;
}

size_t memory_available_bytes() {
  std::ifstream f("/proc/meminfo");
  std::string key;
  size_t kib = 0;
  while (f >> key >> kib) {
    if (key == "MemAvailable:") return kib << 10;
    f.ignore(64, '\n');
  }
  return 0;
}

Result<size_t> place_on_huge_pages(Model& model, const HugePagePlacement& placement) {
  if (model.huge_pages) return size_t(0);  // placed once: matrices outside this selection may point there
  const std::vector<Matrix*> matrices = used_matrices(model, placement);
  // Where each matrix goes, by where it is: one used twice (tied embeddings) is copied once.
  std::map<const void*, std::pair<size_t, size_t>> places;  // offset, bytes
  size_t total = 0;
  for (const Matrix* m : matrices)
    if (places.try_emplace(m->data, total, m->bytes()).second) total += round_up(m->bytes(), kAlign);
  if (total == 0 || total < placement.min_bytes || !huge_pages_available()) return size_t(0);
  if (double(total) > placement.max_share_of_available * double(memory_available_bytes())) return size_t(0);

  Result<std::shared_ptr<HugePageRegion>> region = HugePageRegion::allocate(total);
  if (!region) return region.error();
  uint8_t* base = (*region)->begin();

  {
    WeightReader reader(model);  // pread: the mapping's pages of the copied weights are never touched
    for (const auto& [from, place] : places) reader.read(static_cast<const uint8_t*>(from), place.second, base + place.first);
  }
  for (Matrix* m : matrices) m->data = base + places.at(m->data).first;
  (*region)->make_read_only();  // weights are read-only, as in their files
  model.huge_pages = std::move(*region);
  return total;
}

}  // namespace larql
