// Runs a shell command for a test and returns its exit status and output (stdout and
// whatever the command line redirects into it).
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace larql::test {

struct CommandResult {
  int status = -1;
  std::string output;
};

inline CommandResult run_command(const std::string& command) {
  CommandResult r;
  if (FILE* p = popen(command.c_str(), "r")) {
    char buf[1 << 14];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
    const int status = pclose(p);
    r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  return r;
}

}  // namespace larql::test
