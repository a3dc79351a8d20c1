// Resident memory of a mixture-of-experts model after a short decode, against the weight
// bytes that decode actually read: weights stay memory-mapped, so a process should hold
// only the pages of the experts its tokens chose (plus attention, norms, routers, the
// classifier and the embedding rows of its tokens), not the whole file.
//
//   build/bench/moe_rss_bench MODEL [--decode-tokens 32] [--threads 2]
//
// The model is used in its file's mapping (no huge-page copy: that copy is the whole file by
// design). Decode starts from a one-token prompt. Resident pages are the kernel's count
// (/proc/self/smaps: the Rss of the model file's mappings, and VmRSS/VmHWM for the whole
// process); the bytes touched are counted here from the routing each layer saw, rounded out
// to whole 4 KiB pages. For a model whose routers reach few experts write it with
// `larql synth --reachable-experts N`.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

#include "infer/generate.h"
#include "infer/local_ffn.h"
#include "model/loader.h"

namespace {

using namespace larql;

constexpr uintptr_t kPage = 4096;

// The experts each layer's positions chose, over the whole run.
class ChoiceRecordingFfn : public FfnBackend {
 public:
  ChoiceRecordingFfn(const Model& m, ThreadPool& pool) : local_(m, pool) {}
  Status forward(uint32_t layer, std::span<const float> x, size_t rows, std::span<float> out) override {
    return local_.forward(layer, x, rows, out);
  }
  Status experts(uint32_t layer, std::span<const float> x, size_t rows, std::span<const ExpertAssignment> a,
                 std::span<float> out) override {
    for (const ExpertAssignment& e : a) chosen[layer].insert(e.expert);
    return local_.experts(layer, x, rows, a, out);
  }
  std::map<uint32_t, std::set<uint32_t>> chosen;

 private:
  LocalFfn local_;
};

// Byte ranges of the mapped files, merged into whole pages.
class PageSet {
 public:
  explicit PageSet(const Model& m) : model_(m) {}
  // Counts [p, p + bytes) when it lies in one of the model's mappings (norms converted at
  // load live on the heap and are not the file's).
  void add(const void* p, size_t bytes) {
    const auto* b = static_cast<const uint8_t*>(p);
    for (const auto& f : model_.files)
      if (b >= f->data() && b + bytes <= f->data() + f->size()) {
        const uintptr_t begin = reinterpret_cast<uintptr_t>(b) / kPage, end = (reinterpret_cast<uintptr_t>(b) + bytes + kPage - 1) / kPage;
        ranges_.emplace_back(begin, end);
        return;
      }
  }
  void add(const Matrix& w) {
    if (w.data) add(w.data, w.bytes());
  }
  size_t bytes() {
    std::sort(ranges_.begin(), ranges_.end());
    size_t pages = 0;
    uintptr_t covered = 0;
    for (auto [begin, end] : ranges_) {
      begin = std::max(begin, covered);
      if (end > begin) pages += end - begin, covered = end;
    }
    return pages * kPage;
  }

 private:
  const Model& model_;
  std::vector<std::pair<uintptr_t, uintptr_t>> ranges_;
};

// Rss of the model files' mappings (smaps), and the process's VmRSS and VmHWM (status), in bytes.
struct Resident {
  size_t weights = 0, process = 0, peak = 0;
};

Resident resident(const Model& m) {
  Resident r;
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool in_model = false;
  while (std::getline(smaps, line)) {
    uintptr_t begin = 0, end = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> begin >> dash >> end && dash == '-') {
      in_model = false;
      for (const auto& f : m.files)
        in_model |= reinterpret_cast<uintptr_t>(f->data()) < end && reinterpret_cast<uintptr_t>(f->data() + f->size()) > begin;
      continue;
    }
    size_t kb = 0;
    if (in_model && std::sscanf(line.c_str(), "Rss: %zu kB", &kb) == 1) r.weights += kb * 1024;
  }
  std::ifstream status("/proc/self/status");
  while (std::getline(status, line)) {
    size_t kb = 0;
    if (std::sscanf(line.c_str(), "VmRSS: %zu kB", &kb) == 1) r.process = kb * 1024;
    if (std::sscanf(line.c_str(), "VmHWM: %zu kB", &kb) == 1) r.peak = kb * 1024;
  }
  return r;
}

// Pages of [p, p + bytes) mapped in this process (/proc/self/pagemap's present bit).
size_t mapped_bytes(const void* p, size_t bytes) {
  const int fd = ::open("/proc/self/pagemap", O_RDONLY);
  if (fd < 0) return 0;
  const uintptr_t first = reinterpret_cast<uintptr_t>(p) / kPage, last = (reinterpret_cast<uintptr_t>(p) + bytes + kPage - 1) / kPage;
  std::vector<uint64_t> entries(last - first);
  const ssize_t got = ::pread(fd, entries.data(), entries.size() * 8, off_t(first * 8));
  ::close(fd);
  size_t present = 0;
  for (size_t i = 0; got > 0 && i < size_t(got) / 8; ++i) present += entries[i] >> 63;
  return present * kPage;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"larql: resident memory of a mixture-of-experts model against the weight bytes its decode read"};
  std::string path;
  size_t decode_tokens = 32, threads = 2;
  app.add_option("model", path, "a mixture-of-experts model (Hugging Face directory or GGUF)")->required();
  app.add_option("--decode-tokens", decode_tokens, "tokens decoded after a one-token prompt");
  app.add_option("--threads", threads, "compute threads");
  CLI11_PARSE(app, argc, argv);

  auto loaded = load_model(path);
  if (!loaded) {
    std::fprintf(stderr, "moe_rss_bench: %s\n", loaded.error().message.c_str());
    return 1;
  }
  const Model& m = *loaded;
  if (!m.config.moe.experts) {
    std::fprintf(stderr, "moe_rss_bench: %s is not a mixture-of-experts model\n", path.c_str());
    return 2;
  }
  const Resident at_load = resident(m);
  ThreadPool pool(threads);
  ChoiceRecordingFfn ffn(m, pool);
  Transformer t(m, ffn, pool);
  const std::vector<int> prompt{1};
  auto gen = generate(t, prompt, {.max_new_tokens = decode_tokens, .ignore_eos = true, .sampler = {}});
  if (!gen) {
    std::fprintf(stderr, "moe_rss_bench: %s\n", gen.error().message.c_str());
    return 1;
  }
  const Resident after = resident(m);

  // What the run read: every weight but the embedding and the experts, the embedding rows of
  // its tokens, and the experts its positions chose.
  PageSet touched(m);
  size_t experts_chosen = 0, sparse_layers = 0;
  for (size_t l = 0; l < m.layers.size(); ++l) {
    const LayerWeights& w = m.layers[l];
    for (const Matrix* x : {&w.attn_norm, &w.wq, &w.wk, &w.wv, &w.wo, &w.bq, &w.bk, &w.bv, &w.bo, &w.sinks, &w.q_norm, &w.k_norm,
                            &w.attn_out_norm, &w.ffn_norm, &w.gate, &w.up, &w.down, &w.ffn_out_norm, &w.output_scale, &w.router,
                            &w.router_bias, &w.router_scale, &w.expert_scale, &w.expert_norm, &w.dense_out_norm, &w.expert_out_norm})
      touched.add(*x);
    if (w.experts.empty()) continue;
    ++sparse_layers;
    for (uint32_t e : ffn.chosen[uint32_t(l)]) {
      const ExpertWeights& x = w.experts[e];
      for (const Matrix* p : {&x.gate, &x.up, &x.down, &x.gate_bias, &x.up_bias, &x.down_bias}) touched.add(*p);
      ++experts_chosen;
    }
  }
  touched.add(m.final_norm);
  touched.add(m.classifier);
  std::set<int> tokens(prompt.begin(), prompt.end());
  tokens.insert(gen->generated.begin(), gen->generated.end());
  const size_t row_bytes = dtype_bytes(m.embed.dtype, m.embed.cols);
  for (int token : tokens) touched.add(static_cast<const uint8_t*>(m.embed.data) + size_t(token) * row_bytes, row_bytes);
  const size_t touched_bytes = touched.bytes();
  size_t file_bytes = 0;
  for (const auto& f : m.files) file_bytes += f->size();

  std::printf("%s: %zu tokens decoded from a one-token prompt, %zu threads, weights mapped (no huge pages)\n", path.c_str(),
              gen->generated.size(), threads);
  std::printf("experts chosen: %.1f of %zu per layer on average (%zu sparse layers)\n",
              double(experts_chosen) / double(std::max<size_t>(sparse_layers, 1)), m.config.moe.experts, sparse_layers);
  std::printf("file %.1f MB; weight bytes the run read %.1f MB (whole pages)\n", file_bytes / 1e6, touched_bytes / 1e6);
  std::printf("resident weights (smaps Rss of the file's mappings): %.1f MB after load, %.1f MB after decode = %.3fx the bytes read\n",
              at_load.weights / 1e6, after.weights / 1e6, double(after.weights) / double(touched_bytes));
  std::printf("process VmRSS %.1f MB (peak %.1f MB): %.1f MB besides the weights (KV cache, buffers, tokenizer, code)\n",
              after.process / 1e6, after.peak / 1e6, (double(after.process) - double(after.weights)) / 1e6);
  std::printf("of which the embedding table: %.1f MB mapped for %zu rows read; the classifier %.1f of %.1f MB\n",
              mapped_bytes(m.embed.data, m.embed.bytes()) / 1e6, tokens.size(), mapped_bytes(m.classifier.data, m.classifier.bytes()) / 1e6,
              m.classifier.bytes() / 1e6);
  return 0;
}
