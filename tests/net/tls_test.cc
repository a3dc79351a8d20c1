// HTTPS: a shard with --tls-cert/--tls-key, reached by the client through https:// with
// --ca-cert for the private CA; without the CA the client refuses the certificate. A router
// reaches the same shard with --shard-ca-cert, and serves HTTPS itself to `larql run --ca-cert`.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "model/loader.h"
#include "net/remote_ffn.h"
#include "support/command.h"
#include "support/process.h"

namespace larql {
namespace {

TEST(Tls, ShardOverHttpsWithPrivateCa) {
  // openssl (the command) is installed by make deps; without it this test fails rather than skips.
  const auto dir = std::filesystem::temp_directory_path() / ("larql_tls_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string cert = (dir / "cert.pem").string(), key = (dir / "key.pem").string();
  const std::string make_cert = "openssl req -x509 -newkey rsa:2048 -nodes -keyout " + key + " -out " + cert +
                                " -days 1 -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 >/dev/null 2>&1";
  ASSERT_EQ(std::system(make_cert.c_str()), 0);

  const std::string model_path = std::string(LARQL_SOURCE_DIR) + "/models/demo";
  constexpr size_t kHidden = 384;
  test::ChildProcess s({"serve", model_path, "--port", "0", "--tls-cert", cert, "--tls-key", key, "--api-key", "k"});
  ASSERT_EQ(s.url().rfind("https://", 0), 0u) << s.startup_line();
  auto model = load_model(model_path);
  ASSERT_TRUE(model.ok());
  auto wire = wire::client_wire("f16", [](const char*) { return nullptr; });
  std::vector<std::string> warnings;

  auto untrusted = RemoteFfn::connect(*model, {s.url(), *wire, std::string("k"), {}, 5000}, &warnings);
  ASSERT_FALSE(untrusted.ok());
  EXPECT_NE(untrusted.error().message.find("certificate verify failed"), std::string::npos) << untrusted.error().message;

  auto trusted = RemoteFfn::connect(*model, {s.url(), *wire, std::string("k"), cert, 5000}, &warnings);
  ASSERT_TRUE(trusted.ok()) << trusted.error().message;
  std::vector<float> x(kHidden, 0.25f), y(kHidden);
  auto st = (*trusted)->forward(2, x, 1, y);
  ASSERT_TRUE(st.ok()) << st.error().message;
  EXPECT_GT((*trusted)->stats().bytes_received, 0u);

  // A router in front of the https shard trusts the same private CA with --shard-ca-cert.
  test::ChildProcess router({"router", "--port", "0", "--shards", "0-5=" + s.url(), "--shard-key", "k",
                             "--shard-ca-cert", cert});
  auto routed = RemoteFfn::connect(*model, {router.url(), *wire, std::string("k"), {}, 5000}, &warnings);
  ASSERT_TRUE(routed.ok()) << routed.error().message;
  std::vector<float> y_routed(kHidden);
  st = (*routed)->forward(2, x, 1, y_routed);
  ASSERT_TRUE(st.ok()) << st.error().message;
  EXPECT_EQ(y_routed, y);  // the same bytes, forwarded
  EXPECT_EQ(router.stop(), 0);

  // The router's own HTTPS (--tls-cert/--tls-key): clients trust it with --ca-cert.
  test::ChildProcess tls_router({"router", "--port", "0", "--shards", "0-5=" + s.url(), "--shard-key", "k", "--shard-ca-cert",
                                 cert, "--tls-cert", cert, "--tls-key", key});
  ASSERT_EQ(tls_router.url().rfind("https://", 0), 0u) << tls_router.startup_line();
  auto over_tls = RemoteFfn::connect(*model, {tls_router.url(), *wire, std::string("k"), cert, 5000}, &warnings);
  ASSERT_TRUE(over_tls.ok()) << over_tls.error().message;
  std::vector<float> y_tls(kHidden);
  st = (*over_tls)->forward(2, x, 1, y_tls);
  ASSERT_TRUE(st.ok()) << st.error().message;
  EXPECT_EQ(y_tls, y);

  // The same as a user runs it: larql run --ffn https://... --ca-cert, against the TLS router.
  const auto cli = test::run_command(std::string(LARQL_BINARY) + " run " + model_path + " --prompt 'In the beginning' --steps 6" +
                                     " --json --threads 1 --api-key k --ca-cert " + cert + " --ffn " + tls_router.url() + " 2>&1");
  ASSERT_EQ(cli.status, 0) << cli.output;
  EXPECT_EQ(nlohmann::json::parse(cli.output)["generated_ids"].size(), 6u) << cli.output;
  const auto untrusted_cli = test::run_command(std::string(LARQL_BINARY) + " run " + model_path +
                                               " --prompt hi --steps 2 --api-key k --ffn " + tls_router.url() + " 2>&1");
  EXPECT_NE(untrusted_cli.status, 0);
  EXPECT_NE(untrusted_cli.output.find("certificate verify failed"), std::string::npos) << untrusted_cli.output;
  EXPECT_EQ(tls_router.stop(), 0);
  EXPECT_EQ(s.stop(), 0);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace larql
