// An httplib call that must have reached the server: its response, or an exception that
// fails only the current test (dereferencing a failed httplib::Result would crash the
// whole test binary and hide every later test).
#pragma once

#include <httplib.h>

#include <stdexcept>

namespace larql::test {

inline httplib::Response must(httplib::Result result) {
  if (!result) throw std::runtime_error("no HTTP response: " + httplib::to_string(result.error()));
  return *result;
}

}  // namespace larql::test
