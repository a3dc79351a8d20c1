// The committed demo model (models/demo) exported to llama2.c's format, and the run.c
// oracle made from that export (tests/data/llama2c, see its README): the llama2.c tests'
// trained model, from the repository alone.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "model/llama2c_writer.h"
#include "model/loader.h"

namespace larql::test {

inline std::string llama2c_data(const std::string& name) { return std::string(LARQL_SOURCE_DIR) + "/tests/data/llama2c/" + name; }

// run.c's greedy output for the export (demo.run_c.json).
inline nlohmann::json demo_run_c_oracle() {
  std::ifstream in(llama2c_data("demo.run_c.json"));
  return nlohmann::json::parse(in);
}

// The tokenizer.bin the oracle was made with: id i is the character U+4E00+i.
inline std::string demo_ids_tokenizer() { return llama2c_data("demo-ids.tokenizer.bin"); }

// models/demo as a llama2.c file (f32), written once per test process and removed at exit.
inline const std::string& demo_llama2c() {
  struct Exported {
    std::string path = (std::filesystem::temp_directory_path() / ("larql_demo_llama2c_" + std::to_string(::getpid()) + ".bin")).string();
    Exported() {
      auto model = load_model(std::string(LARQL_SOURCE_DIR) + "/models/demo");
      if (!model) throw std::runtime_error(model.error().message);
      if (auto s = write_llama2c(*model, path); !s) throw std::runtime_error(s.error().message);
    }
    ~Exported() { std::filesystem::remove(path); }
  };
  static const Exported exported;
  return exported.path;
}

}  // namespace larql::test
