// `make package` as an operator uses it: the package built from this build folder, unpacked
// into a scratch root (dpkg -x), its systemd units verified there by systemd-analyze (the
// template as an instance), its man page covering every subcommand, and the installed
// binary's demo run from an empty directory, so nothing of the source tree is found.
#include <unistd.h>

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "support/command.h"

namespace larql {
namespace {

namespace fs = std::filesystem;

class Package : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    scratch_ = fs::temp_directory_path() / ("larql-package-" + std::to_string(::getpid()));
    fs::remove_all(scratch_);
    fs::create_directories(scratch_ / "empty");
    const auto made = test::run_command("bash '" LARQL_SOURCE_DIR "/scripts/make-package.sh' '" LARQL_BUILD_DIR "' '" +
                                        scratch_.string() + "' 2>&1");
    ASSERT_EQ(made.status, 0) << made.output;
    deb_ = made.output;
    while (!deb_.empty() && deb_.back() == '\n') deb_.pop_back();
    const auto unpacked = test::run_command("dpkg -x '" + deb_ + "' '" + root().string() + "' 2>&1");
    ASSERT_EQ(unpacked.status, 0) << unpacked.output;
  }
  static void TearDownTestSuite() { fs::remove_all(scratch_); }
  static fs::path root() { return scratch_ / "root"; }

  // systemd-analyze verify of `unit` in the scratch root, beside the host's own units (the
  // targets and slices ours refer to): its exit status and what it printed. Its man-page
  // check looks on the host, where the package is not installed (the page is checked below).
  static test::CommandResult verify(const std::string& unit) {
    return test::run_command("systemd-analyze verify --man=no --root='" + root().string() + "' '" + unit + "' 2>&1");
  }

  static inline fs::path scratch_;
  static inline std::string deb_;
};

TEST_F(Package, DescribesItselfWithTheLibrariesItNeeds) {
  ASSERT_FALSE(deb_.empty());
  const auto info = test::run_command("dpkg-deb --field '" + deb_ + "' Package Version Depends 2>&1");
  ASSERT_EQ(info.status, 0) << info.output;
  EXPECT_NE(info.output.find("Package: larql"), std::string::npos) << info.output;
  EXPECT_NE(info.output.find("libc6"), std::string::npos) << "Depends from dpkg-shlibdeps: " << info.output;
  EXPECT_NE(info.output.find("libssl3"), std::string::npos) << info.output;
}

TEST_F(Package, ItsUnitsVerifyAndABrokenOneDoesNot) {
  const fs::path units = root() / "usr/lib/systemd/system";
  for (const char* unit : {"larql-shard@.service", "larql-router.service", "larql-api.service"})
    ASSERT_TRUE(fs::exists(units / unit)) << unit;
  // The host's units, without replacing ours.
  for (const char* host : {"/usr/lib/systemd/system", "/lib/systemd/system"}) {
    if (fs::exists(host)) {
      ASSERT_EQ(test::run_command("cp -rn " + std::string(host) + "/. '" + units.string() + "/' 2>&1").status, 0);
    }
  }
  for (const char* unit : {"larql-shard@0.service", "larql-router.service", "larql-api.service"}) {
    const auto r = verify(unit);
    EXPECT_EQ(r.status, 0) << unit << ": " << r.output;
    EXPECT_EQ(r.output, "") << unit << ": systemd-analyze had something to say";
  }
  // The check can fail: a copy of the shard's unit whose binary is missing.
  ASSERT_EQ(test::run_command("sed 's|/usr/bin/larql|/usr/bin/larql-missing|' '" + (units / "larql-shard@.service").string() +
                              "' > '" + (units / "larql-broken@.service").string() + "'").status,
            0);
  const auto broken = verify("larql-broken@0.service");
  EXPECT_NE(broken.output.find("larql-missing"), std::string::npos) << broken.output;
}

TEST_F(Package, ItsManPageCoversEverySubcommand) {
  const auto page = test::run_command("zcat '" + (root() / "usr/share/man/man1/larql.1.gz").string() + "'");
  ASSERT_EQ(page.status, 0);
  const auto help = test::run_command("'" + (root() / "usr/bin/larql").string() + "' --help");
  ASSERT_EQ(help.status, 0);
  size_t subcommands = 0;
  for (const char* cmd : {"run", "serve", "api", "router", "bench", "loadtest", "demo", "tokenize", "synth", "quantize", "perplexity"}) {
    EXPECT_NE(help.output.find("  " + std::string(cmd) + " "), std::string::npos) << cmd;
    EXPECT_NE(page.output.find(".SS \"larql " + std::string(cmd) + "\""), std::string::npos) << cmd;
    ++subcommands;
  }
  EXPECT_EQ(subcommands, 11u);
}

TEST_F(Package, TheInstalledBinaryRunsItsDemoFromAnEmptyDirectory) {
  const auto r = test::run_command("cd '" + (scratch_ / "empty").string() + "' && '" + (root() / "usr/bin/larql").string() +
                                   "' demo --steps 4 2>&1");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("loading " + (root() / "usr/share/larql/models/demo").string()), std::string::npos)
      << "the packaged model, not the source tree's: " << r.output;
  EXPECT_NE(r.output.find("f32   yes"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace larql
