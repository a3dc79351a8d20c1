// The pages people open, in a real browser: Debian's headless Chromium driven by
// puppeteer-core (tests/web/*.js) against real servers on loopback. A screenshot of each
// page goes to build/web-screenshots/ for a person to look at. Registered in the normal
// build only (the browser is not what the sanitizers check).
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "support/command.h"
#include "support/js_tokenizers.h"
#include "support/process.h"

namespace larql {
namespace {

using nlohmann::json;
using test::ChildProcess;

const std::string kDemo = LARQL_SOURCE_DIR "/models/demo";

// `node tests/web/SCRIPT args...` with the JS cache's packages; its JSON line.
json run_page_script(const std::string& script, const std::vector<std::string>& args) {
  std::string command = "NODE_PATH='" + (test::js_cache() / "node_modules").string() + "' node '" LARQL_SOURCE_DIR "/tests/web/" +
                        script + "'";
  for (const auto& a : args) command += " '" + a + "'";
  const auto r = test::run_command(command);
  EXPECT_EQ(r.status, 0) << r.output;
  const size_t line = r.output.rfind("{\"");
  return r.status == 0 && line != std::string::npos ? json::parse(r.output.substr(line)) : json::object();
}

std::string screenshot(const std::string& name) {
  const std::filesystem::path dir = std::filesystem::path(LARQL_BUILD_DIR) / "web-screenshots";
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}

// The demo grid (two shards, layers 0-2 and 3-5) behind `larql api`.
TEST(ChatPage, AsksForTheKeyStreamsTheAnswerAndShowsNoConsoleError) {
  ChildProcess low({"serve", kDemo, "--port", "0", "--layers", "0-2", "--threads", "1"});
  ChildProcess high({"serve", kDemo, "--port", "0", "--layers", "3-5", "--threads", "1"});
  ChildProcess api({"api", kDemo, "--port", "0", "--chat-template", "chatml", "--api-key", "page-key", "--threads", "1", "--ffn",
                    "0-2=" + low.url() + ",3-5=" + high.url()});
  const std::string shot = screenshot("chat.png");
  const json got = run_page_script("chat_page.js", {api.url(), "page-key", shot});
  ASSERT_FALSE(got.empty());
  EXPECT_NE(got["model"].get<std::string>().find("demo, context 512 tokens"), std::string::npos) << got.dump();
  EXPECT_FALSE(got["answer"].get<std::string>().empty()) << got.dump();
  EXPECT_EQ(got["answer"], got["expected"]) << "the page shows the API's greedy answer, streamed";
  EXPECT_NE(got["stats"].get<std::string>().find("tokens/s"), std::string::npos) << got.dump();
  EXPECT_TRUE(got["errors"].empty()) << got["errors"].dump();
  EXPECT_TRUE(std::filesystem::file_size(shot) > 0);
  std::printf("chat page: %s | %s\nscreenshot: %s\n", got["answer"].get<std::string>().c_str(), got["stats"].get<std::string>().c_str(),
              shot.c_str());
}

TEST(GridPage, ShowsARangeDownWhenItsShardStopsAndUpWhenItReturns) {
  const std::string shot = screenshot("grid.png");
  const json got = run_page_script("grid_page.js", {LARQL_BINARY, kDemo, shot});
  ASSERT_FALSE(got.empty());
  EXPECT_EQ(got["states"], json::array({"both up", "3-5 down", "3-5 up again"}));
  EXPECT_NE(got["summary"].get<std::string>().find("demo (llama), 6 layers"), std::string::npos) << got.dump();
  EXPECT_EQ(got["rows"].size(), 2u) << got.dump();
  EXPECT_TRUE(got["errors"].empty()) << got["errors"].dump();
  std::printf("grid page: %s\nscreenshot: %s\n", got["summary"].get<std::string>().c_str(), shot.c_str());
}

TEST(GridPage, ShowsTheSessionsOpenOnEachReplica) {
  const std::string shot = screenshot("grid-sessions.png");
  const json got = run_page_script("grid_sessions_page.js", {LARQL_BINARY, kDemo, shot});
  ASSERT_FALSE(got.empty());
  EXPECT_NE(got["summary"].get<std::string>().find("sessions open: 1"), std::string::npos) << got.dump();
  ASSERT_EQ(got["rows"].size(), 2u) << got.dump();
  for (const auto& row : got["rows"]) EXPECT_EQ(row.back(), "1") << row;  // one part on each range's replica
  EXPECT_TRUE(got["errors"].empty()) << got["errors"].dump();
}

}  // namespace
}  // namespace larql
