// Where the read-only test models live (../shared/models next to the checkout).
// Tests that need them skip, saying so, when the folder is absent.
#pragma once

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

namespace larql::test {

inline std::string shared_model(const std::string& name) { return std::string(LARQL_SHARED_MODELS_DIR) + "/" + name; }

#define LARQL_REQUIRE_SHARED_MODEL(name)                                                          \
  do {                                                                                            \
    if (!std::filesystem::exists(::larql::test::shared_model(name)))                              \
      GTEST_SKIP() << "skipped: " << ::larql::test::shared_model(name)                            \
                   << " is missing (the shared test models live in ../shared/models)";            \
  } while (0)

}  // namespace larql::test
