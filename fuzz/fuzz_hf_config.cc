// Any bytes as a Hugging Face config.json: the loader reads a configuration or names what
// is wrong, and never throws (a field of the wrong JSON type once aborted larql).
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "fuzz_common.h"
#include "model/hf_loader.h"

namespace {

const std::filesystem::path& directory() {
  static const std::filesystem::path dir = [] {
    auto d = std::filesystem::temp_directory_path() / ("larql_fuzz_hf_config_" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::ofstream(directory() / "config.json", std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data), std::streamsize(size));
  auto config = larql::read_hf_config(directory().string());
  if (config) larql::fuzz::check(config->layers > 0 && config->layer_configs.size() == config->layers);
  else larql::fuzz::check(!config.error().message.empty());
  return 0;
}
