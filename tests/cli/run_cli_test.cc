// The `larql` binary as a user runs it: `run --json` fields and ids, errors that name the
// problem, `tokenize`, `synth` output that `run` loads, and `demo` end to end.
#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "support/command.h"
#include "support/process.h"
#include "support/demo_llama2c.h"

namespace larql {
namespace {

struct Output {
  int status;
  std::string out;
};

Output larql(const std::string& args) {
  auto r = test::run_command(std::string(LARQL_BINARY) + " " + args + " 2>&1");
  return {r.status, r.output};
}

// The first `n` code points of the text run.c printed after `seq`'s prompt (the oracle's
// tokenizer spells every id with one character).
std::string oracle_text(const nlohmann::json& seq, size_t n) {
  const std::string printed = seq["printed"], prompt = seq["prompt"];
  size_t end = prompt.size();
  for (size_t points = 0; points < n && end < printed.size(); ++points)
    do ++end; while (end < printed.size() && (printed[end] & 0xC0) == 0x80);
  return printed.substr(prompt.size(), end - prompt.size());
}

// The subcommands `larql --help` lists.
std::vector<std::string> larql_commands() {
  const std::string help = larql("--help").out;
  std::vector<std::string> commands;
  std::istringstream list(help.substr(help.find("Subcommands:")));
  for (std::string line; std::getline(list, line);)
    if (line.starts_with("  ") && line.size() > 2 && line[2] != ' ') commands.push_back(line.substr(2, line.find(' ', 2) - 2));
  EXPECT_GE(commands.size(), 10u) << help;
  return commands;
}

// Every command's --help (and so the man page, made from it) ends with an example of it.
TEST(Cli, EveryCommandsHelpEndsWithAnExample) {
  for (const std::string& command : larql_commands()) {
    const std::string help = larql(command + " --help").out;
    const size_t at = help.rfind("Example:\n  larql " + command + " ");
    EXPECT_NE(at, std::string::npos) << command << ":\n" << help;
  }
}

// Every numeric option of every command, given -1, answers with one short line that names
// the option; every unsigned or bounded one refuses it, saying the bound (not CLI11's bound
// written out in 309 digits, nor -1 read as 2^64 − 1).
TEST(Cli, EveryNumericOptionRefusesAnOutOfRangeValueInOneShortLine) {
  const std::vector<std::string> commands = larql_commands();
  ASSERT_GE(commands.size(), 10u);
  const std::regex numeric(R"(^\s+(?:-[a-z], )?(--[a-z0-9-]+) ((?:UINT|INT|FLOAT)\S*))");
  size_t checked = 0, bounded = 0;
  for (const std::string& command : commands) {
    std::istringstream options(larql(command + " --help").out);
    for (std::string line; std::getline(options, line);) {
      std::smatch m;
      if (!std::regex_search(line, m, numeric)) continue;
      const std::string option = m[1], type = m[2];
      const Output r = larql(command + " " + option + " -1");
      const std::string first = r.out.substr(0, r.out.find('\n'));
      ++checked;
      EXPECT_LE(first.size(), 160u) << command << " " << option << ": " << first;
      const bool must_refuse = type.starts_with("UINT") || type.find("NONNEGATIVE") != std::string::npos ||
                               type.find("POSITIVE") != std::string::npos || type.find("in [") != std::string::npos ||
                               type.find(":INT") != std::string::npos;
      if (!must_refuse) continue;
      ++bounded;
      EXPECT_NE(r.status, 0) << command << " " << option << " -1 was taken";
      EXPECT_TRUE(first.starts_with(option + ": ")) << command << " " << option << ": " << first;
    }
  }
  EXPECT_GE(checked, 60u);
  EXPECT_GE(bounded, 50u);
  const Output temperature = larql("run --temperature -1");
  EXPECT_EQ(temperature.out.substr(0, temperature.out.find('\n')), "--temperature: must be ≥ 0 (got -1)");
}

// --prompt-cache: the second run of a prompt continues the first's keys and values (all
// but its last position) and generates the same ids; a run of another model refuses the
// file, naming why, and leaves it as it was.
TEST(RunCli, APromptCacheFileIsContinuedAndRefusedByAnotherModel) {
  const std::string file = (std::filesystem::temp_directory_path() / ("larql_run_cache_" + std::to_string(::getpid()) + ".kv")).string();
  std::filesystem::remove(file);
  const std::string demo = std::string(LARQL_SOURCE_DIR) + "/models/demo";
  const std::string args = " --prompt 'And God said, Let there be light' --steps 12 --json --threads 1 --prompt-cache " + file;
  const Output first = larql("run " + demo + args), second = larql("run " + demo + args);
  ASSERT_EQ(first.status, 0) << first.out;
  ASSERT_EQ(second.status, 0) << second.out;
  const auto a = nlohmann::json::parse(first.out), b = nlohmann::json::parse(second.out);
  EXPECT_EQ(a["cached_tokens"], 0);
  EXPECT_EQ(b["cached_tokens"], b["prompt_ids"].size() - 1);
  EXPECT_EQ(b["generated_ids"], a["generated_ids"]);
  const auto written = std::filesystem::last_write_time(file);
  const Output other = larql("run " + test::demo_llama2c() + " --prompt-ids 1,2,3 --steps 2 --prompt-cache " + file);
  EXPECT_NE(other.status, 0);
  EXPECT_NE(other.out.find("written for another model"), std::string::npos) << other.out;
  EXPECT_EQ(std::filesystem::last_write_time(file), written) << "a refused file is left as it was";
  std::filesystem::remove(file);
}

TEST(RunCli, JsonHasTheContractFields) {
  const auto seq = test::demo_run_c_oracle()["sequences"][1];
  const auto r = larql("run " + test::demo_llama2c() + " --tokenizer " + test::demo_ids_tokenizer() + " --prompt '" +
                       seq["prompt"].get<std::string>() + "' --steps 12 --json");
  ASSERT_EQ(r.status, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["prompt_ids"], seq["prompt_ids"]);
  const auto continuation = seq["continuation_ids"].get<std::vector<int>>();
  EXPECT_EQ(j["generated_ids"], std::vector<int>(continuation.begin(), continuation.begin() + 12));
  EXPECT_EQ(j["text"].get<std::string>(), oracle_text(seq, 12));  // what run.c printed after the prompt
  EXPECT_EQ(j["stop_reason"], "steps");
  for (const char* key : {"tokens_per_second", "load_seconds"}) EXPECT_TRUE(j[key].is_number()) << key;
}

TEST(RunCli, CtxCapsPromptAndGenerationTogether) {
  const std::string model = std::string(LARQL_SOURCE_DIR) + "/models/demo";
  auto r = larql("run " + model + " --prompt-ids 1,400,401 --steps 10 --ctx 6 --json");
  ASSERT_EQ(r.status, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out.substr(r.out.find('{')));
  EXPECT_EQ(j["generated_ids"].size(), 3u) << "6 positions, 3 of them the prompt's";
  r = larql("run " + model + " --prompt-ids 1,400,401 --ctx 3");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.out.find("--ctx 3 leaves no room"), std::string::npos) << r.out;
}

TEST(RunCli, StreamsTextAndIdsWithoutTokenizer) {
  const auto r = larql("run " + test::demo_llama2c() + " --prompt-ids 1,403,407 --steps 5 --ignore-eos");
  ASSERT_EQ(r.status, 0) << r.out;
  int count = 0;
  for (std::string_view s = r.out; !s.empty();) {
    const size_t sp = s.find_first_of(" \n");
    if (sp != 0) ++count;
    if (sp == std::string_view::npos) break;
    s.remove_prefix(sp + 1);
  }
  EXPECT_EQ(count, 5) << r.out;
}

// A small random checkpoint written by `larql synth` (vocabulary 300, end token 299).
struct SynthDir {
  SynthDir() {
    const auto r = larql("synth --out " + path.string() + " --hidden 64 --layers 2 --ffn 128 --heads 4 --kv-heads 2 --vocab 300 --seed 9");
    EXPECT_EQ(r.status, 0) << r.out;
  }
  ~SynthDir() { std::filesystem::remove_all(path); }
  std::filesystem::path path = std::filesystem::temp_directory_path() / ("larql_cli_synth_" + std::to_string(::getpid()));
};

nlohmann::json run_json(const std::string& args) {
  const auto r = larql("run " + args + " --json");
  EXPECT_EQ(r.status, 0) << r.out;
  return nlohmann::json::parse(r.out, nullptr, false);
}

TEST(RunCli, ErrorsNameTheProblem) {
  auto r = larql("run /nonexistent/model.bin --prompt-ids 1");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.out.find("/nonexistent/model.bin: no such file"), std::string::npos) << r.out;
  SynthDir synth;
  r = larql("run " + synth.path.string() + " --prompt-ids 1,99999");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.out.find("prompt id 99999 is outside the vocabulary"), std::string::npos) << r.out;
  std::filesystem::remove(synth.path / "tokenizer.json");
  r = larql("run " + synth.path.string() + " --prompt hello");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.out.find("--prompt needs a tokenizer"), std::string::npos) << r.out;
}

TEST(RunCli, GenerationStopsAtTheEndTokenUnlessIgnored) {
  SynthDir synth;
  const auto free_run = run_json(synth.path.string() + " --prompt-ids 5,6,7 --steps 12 --ignore-eos --threads 1");
  ASSERT_EQ(free_run["stop_reason"], "steps");
  const auto ids = free_run["generated_ids"].get<std::vector<int>>();
  ASSERT_EQ(ids.size(), 12u);
  // Make the 4th generated id the end token (unless an earlier id is the same token).
  const size_t stop_at = size_t(std::find(ids.begin(), ids.end(), ids[3]) - ids.begin());
  std::ofstream(synth.path / "generation_config.json") << nlohmann::json{{"eos_token_id", {ids[3], 299}}}.dump();
  const auto stopped = run_json(synth.path.string() + " --prompt-ids 5,6,7 --steps 12 --threads 1");
  EXPECT_EQ(stopped["stop_reason"], "eos");
  EXPECT_EQ(stopped["generated_ids"], std::vector<int>(ids.begin(), ids.begin() + std::ptrdiff_t(stop_at)));  // the end token is not emitted
  const auto ignored = run_json(synth.path.string() + " --prompt-ids 5,6,7 --steps 12 --ignore-eos --threads 1");
  EXPECT_EQ(ignored["generated_ids"], free_run["generated_ids"]);
}

TEST(RunCli, JsonStaysValidWhenTheGeneratedBytesAreNotUtf8) {
  // A random Gemma 4 of byte tokens whose greedy run repeats the byte 0xCE: no character.
  const auto dir = std::filesystem::temp_directory_path() / ("larql_cli_bytes_" + std::to_string(::getpid()));
  ASSERT_EQ(larql("synth --family gemma4 --out " + dir.string() +
                  " --hidden 64 --heads 4 --kv-heads 2 --head-dim 16 --vocab 300 --layers 2 --ffn 64 --seed 4")
                .status,
            0);
  const auto j = run_json(dir.string() + " --prompt-ids 2,3,4 --steps 6 --threads 1");
  ASSERT_TRUE(j.is_object()) << "run --json printed JSON";
  EXPECT_EQ(j["generated_ids"].back(), 206);
  EXPECT_NE(j["text"].get<std::string>().find("\xEF\xBF\xBD"), std::string::npos) << "U+FFFD where a byte is no character";
  EXPECT_EQ(j["kv_cache_bytes_per_position"], 2u * 2 * (2 * 16) * 4) << "2 layers of 2 heads of 16 (the last full: 1 of 32)";
  std::filesystem::remove_all(dir);
}

// A long run of a model whose sliding layers see 16 keys: their caches keep about that
// window, the full layer every position (kv_cache.h).
TEST(RunCli, SlidingLayersKeepTheirWindowOfTheCache) {
  const auto dir = std::filesystem::temp_directory_path() / ("larql_cli_window_" + std::to_string(::getpid()));
  ASSERT_EQ(larql("synth --family gemma3 --out " + dir.string() +
                  " --hidden 64 --heads 2 --kv-heads 1 --head-dim 32 --vocab 300 --layers 4 --ffn 64 --sliding-window 16"
                  " --sliding-period 4 --context 2048 --seed 4")
                .status,
            0);
  const auto j = run_json(dir.string() + " --prompt-ids 2,3,4 --steps 1200 --ignore-eos --threads 1");
  ASSERT_TRUE(j.is_object()) << "run --json printed JSON";
  ASSERT_EQ(j["generated_ids"].size(), 1200u);
  const size_t per_layer = 2 * 32 * 4, fed = 3 + 1200 - 1;  // a position's key and value in one layer; the last token is not fed
  EXPECT_EQ(j["kv_cache_bytes_per_position"], 4 * per_layer);
  // The full layer (the 4th) holds every position; each sliding one at most its window, the
  // 64 positions a sequence may go back, a drop's step of 64 and two key blocks.
  EXPECT_GE(j["kv_cache_bytes"].get<size_t>(), fed * per_layer);
  EXPECT_LE(j["kv_cache_bytes"].get<size_t>(), (fed + 16) * per_layer + 3 * (16 + 64 + 64 + 32) * per_layer);
}

TEST(RunCli, SamplingFlagsReachTheSampler) {
  const std::string demo = std::string(LARQL_SOURCE_DIR) + "/models/demo --prompt 'In the beginning' --steps 24 --threads 1";
  const auto greedy = run_json(demo);
  const auto a = run_json(demo + " --temperature 1.2 --seed 7"), b = run_json(demo + " --temperature 1.2 --seed 7");
  const auto c = run_json(demo + " --temperature 1.2 --seed 8");
  EXPECT_EQ(a["generated_ids"], b["generated_ids"]);  // a seed repeats
  EXPECT_NE(a["generated_ids"], c["generated_ids"]);  // another seed does not (24 draws at T=1.2)
  EXPECT_NE(a["generated_ids"], greedy["generated_ids"]);
  // A tiny nucleus keeps only the most likely token: sampling becomes greedy.
  EXPECT_EQ(run_json(demo + " --temperature 1.2 --top-p 0.000001 --seed 3")["generated_ids"], greedy["generated_ids"]);
}

TEST(RunCli, SynthOutputRunsWithItsTokenizer) {
  const auto dir = std::filesystem::temp_directory_path() / ("larql_synth_cli_" + std::to_string(::getpid()));
  auto r = larql("synth --out " + dir.string() + " --hidden 64 --layers 2 --ffn 128 --heads 4 --kv-heads 2 --vocab 300 --seed 9");
  ASSERT_EQ(r.status, 0) << r.out;
  r = larql("run " + dir.string() + " --prompt 'hi there' --steps 4 --ignore-eos --json");
  ASSERT_EQ(r.status, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  // The synthetic tokenizer is byte-level with no merges: one id per byte, id = byte.
  EXPECT_EQ(j["prompt_ids"], (std::vector<int>{'h', 'i', ' ', 't', 'h', 'e', 'r', 'e'}));
  EXPECT_EQ(j["generated_ids"].size(), 4u);
  r = larql("tokenize " + dir.string() + " --text 'ab' --json");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(nlohmann::json::parse(r.out)["ids"], (std::vector<int>{'a', 'b'}));
  std::filesystem::remove_all(dir);
}

// An allocation no machine satisfies (a petabyte of weights) ends larql with a message and
// status 1; it escaped the command and aborted the process. Not in the ASan build, whose
// allocator reports a failed `new` and aborts by design instead of throwing.
#if !defined(__SANITIZE_ADDRESS__)
TEST(RunCli, AnAllocationThatFailsEndsWithAMessageNotAnAbort) {
  const auto dir = std::filesystem::temp_directory_path() / ("larql_synth_huge_" + std::to_string(::getpid()));
  const auto r = larql("synth --out " + dir.string() + " --hidden 1000000000000 --layers 1");
  std::filesystem::remove_all(dir);
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("larql: out of memory"), std::string::npos) << r.out;
}
#endif

// `larql quantize` as llama-quantize is used: a K-quant mix from a model directory says
// per tensor what it became and runs; a bf16 GGUF is a valid input (its tokenizer goes
// along); an already quantised file is refused by name.
TEST(QuantizeCli, WritesTheMixRunsItAndRefusesToQuantiseTwice) {
  const auto dir = std::filesystem::temp_directory_path() / ("larql_quantize_cli_" + std::to_string(::getpid()));
  const std::string model = (dir / "model").string(), bf16 = (dir / "bf16.gguf").string(), q4 = (dir / "q4.gguf").string(),
                    q5 = (dir / "q5.gguf").string();
  auto r = larql("synth --out " + model + " --hidden 256 --layers 8 --ffn 512 --heads 4 --kv-heads 2 --vocab 300 --seed 9");
  ASSERT_EQ(r.status, 0) << r.out;
  r = larql("quantize " + model + " " + q4 + " --type q4_k_m --threads 2");
  ASSERT_EQ(r.status, 0) << r.out;
  // use_more_bits(i, 8) picks layers 0, 3, 6, 7 for attn_v and ffn_down.
  for (int layer = 0; layer < 8; ++layer) {
    const std::string type = layer == 0 || layer == 3 || layer == 6 || layer == 7 ? "q6_k" : "q4_k";
    EXPECT_TRUE(std::regex_search(r.out, std::regex("blk\\." + std::to_string(layer) + "\\.ffn_down\\.weight +" + type + " +256 x 512")))
        << layer << "\n" << r.out;
    EXPECT_TRUE(std::regex_search(r.out, std::regex("blk\\." + std::to_string(layer) + "\\.attn_v\\.weight +" + type))) << layer;
  }
  EXPECT_TRUE(std::regex_search(r.out, std::regex("output\\.weight +q6_k +300 x 256")));  // the classifier
  EXPECT_TRUE(std::regex_search(r.out, std::regex("token_embd\\.weight +q4_k")));
  EXPECT_TRUE(std::regex_search(r.out, std::regex("output_norm\\.weight +f32")));
  r = larql("run " + q4 + " --prompt 'hi' --steps 3 --ignore-eos --json");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(nlohmann::json::parse(r.out)["generated_ids"].size(), 3u);

  r = larql("quantize " + model + " " + bf16 + " --type bf16");
  ASSERT_EQ(r.status, 0) << r.out;
  r = larql("quantize " + bf16 + " " + q5 + " --type q5_k_m");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(r.out.find("no tokenizer"), std::string::npos) << r.out;
  r = larql("tokenize " + q5 + " --text 'ab' --json");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(nlohmann::json::parse(r.out)["ids"], (std::vector<int>{'a', 'b'}));

  r = larql("quantize " + q4 + " " + q5 + " --type q6_k");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.out.find("is q4_k; quantise from the f32, f16 or bf16 model instead"), std::string::npos) << r.out;
  r = larql("quantize " + model + " " + q5 + " --type q3_k");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.out.find("q3_k"), std::string::npos) << r.out;
  std::filesystem::remove_all(dir);
}

// The demo's promises: f32 through the grid gives the local text, and every process it
// started (two shards, the router) is gone afterwards.
void expect_grid_matches_local_and_no_process_left(const Output& r) {
  ASSERT_EQ(r.status, 0) << r.out;
  std::smatch local, grid, m;
  ASSERT_TRUE(std::regex_search(r.out, local, std::regex("\nlocal: ([^\n]+)"))) << r.out;
  ASSERT_TRUE(std::regex_search(r.out, grid, std::regex("\ngrid f32: ([^\n]+)"))) << r.out;
  EXPECT_GT(local[1].length(), 20) << "too little text generated: " << r.out;
  EXPECT_EQ(grid[1].str(), local[1].str());
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex("f32 +yes"))) << r.out;
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex("processes((?: [0-9]+)+)"))) << r.out;
  std::istringstream pids(m[1].str());
  int count = 0;
  for (pid_t pid; pids >> pid; ++count) EXPECT_NE(::kill(pid, 0), 0) << "process " << pid << " is still running";
  EXPECT_EQ(count, 3);  // two shards and the router
}

TEST(DemoCli, OnTheCommittedDemoModel) {
  const auto start = std::chrono::steady_clock::now();
  const auto r = larql("demo");  // the default: the repository's models/demo
  std::printf("larql demo took %.1f s\n", std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  expect_grid_matches_local_and_no_process_left(r);
  EXPECT_NE(r.out.find("prompt: And the LORD said unto Moses,"), std::string::npos) << r.out;
}

TEST(DemoCli, SessionsPutsFfnModeAndSessionModeSideBySide) {
  const auto r = larql("demo --sessions --steps 16");
  ASSERT_EQ(r.status, 0) << r.out;
  // Over f32 every mode gives the local tokens; a token is six round trips in FFN mode, two
  // (one a range) with sessions straight to the shards, one through the router.
  std::istringstream table(r.out);
  std::map<std::string, std::string> rows;
  for (std::string line; std::getline(table, line);)
    if ((line.starts_with("FFN mode ") || line.starts_with("sessions ") || line.starts_with("via router ")) &&
        line.find(": ") == std::string::npos)  // the table's rows, not the texts
      rows[line.substr(0, 16)] = line;
  ASSERT_EQ(rows.size(), 6u) << r.out;
  for (const auto& [key, line] : rows) EXPECT_NE(line.find(" yes "), std::string::npos) << line;
  EXPECT_NE(rows["FFN mode   f32  "].find(" 6.0 "), std::string::npos) << rows["FFN mode   f32  "];
  EXPECT_NE(rows["sessions   f32  "].find(" 2.0 "), std::string::npos) << rows["sessions   f32  "];
  EXPECT_NE(rows["via router f32  "].find(" 1.0 "), std::string::npos) << rows["via router f32  "];
}

TEST(DemoCli, KeepRunningLeavesTheGridUpAndCtrlCStopsEveryProcess) {
  test::ChildProcess demo({"demo", "--keep-running", "--steps", "8"}, std::chrono::seconds(120));
  ASSERT_TRUE(test::wait_healthy(demo.url())) << "the router should be up: " << demo.url();
  // The grid: the demo's child processes (two shards and the router), from /proc.
  std::vector<pid_t> grid;
  for (const auto& task : std::filesystem::directory_iterator("/proc/" + std::to_string(demo.pid()) + "/task")) {
    std::ifstream children(task.path() / "children");
    for (pid_t p; children >> p;) grid.push_back(p);
  }
  ASSERT_EQ(grid.size(), 3u);
  EXPECT_EQ(demo.interrupt(), 0);  // Ctrl-C
  for (pid_t p : grid) EXPECT_NE(::kill(p, 0), 0) << "process " << p << " is still running";
  EXPECT_FALSE(test::wait_healthy(demo.url(), std::chrono::seconds(1))) << "the router still answers";
}

TEST(DemoCli, OnALlama2cModel) {
  const auto seq = test::demo_run_c_oracle()["sequences"][2];
  const auto r = larql("demo " + test::demo_llama2c() + " --tokenizer " + test::demo_ids_tokenizer() + " --prompt '" +
                       seq["prompt"].get<std::string>() + "' --steps 20");
  expect_grid_matches_local_and_no_process_left(r);
  EXPECT_NE(r.out.find("local: " + oracle_text(seq, 20)), std::string::npos) << r.out;
}

TEST(ExportLlama2cCli, WritesTheTestsExportAndRefusesWhatRunCCannotCompute) {
  const auto out = std::filesystem::temp_directory_path() / ("larql_cli_export_" + std::to_string(::getpid()) + ".bin");
  auto r = larql("export-llama2c " + std::string(LARQL_SOURCE_DIR) + "/models/demo " + out.string());
  ASSERT_EQ(r.status, 0) << r.out;
  auto bytes = [](const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  EXPECT_EQ(bytes(out.string()), bytes(test::demo_llama2c()));
  // A Gemma checkpoint: sandwich norms, scaled embeddings and GELU are not run.c's.
  const auto gemma = std::filesystem::temp_directory_path() / ("larql_cli_export_gemma_" + std::to_string(::getpid()));
  r = larql("synth --family gemma3 --out " + gemma.string() + " --hidden 64 --layers 2 --ffn 128 --heads 4 --kv-heads 2 --vocab 300 --seed 9");
  ASSERT_EQ(r.status, 0) << r.out;
  r = larql("export-llama2c " + gemma.string() + " " + out.string());
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.out.find("cannot write a llama2.c checkpoint: family 'gemma3_text' is not a plain Llama"), std::string::npos) << r.out;
  std::filesystem::remove_all(gemma);
  std::filesystem::remove(out);
}

TEST(DemoCli, WithoutTheDemoModelItSaysWhatToPass) {
  const auto r = larql("demo /nonexistent/demo-model");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.out.find("pass MODEL"), std::string::npos) << r.out;
}

// `larql plan` as an operator runs it: JSON with the map, the KV cache at the model's own
// context (the demo's 512, not --ctx 4096), and a clear error when the client cannot fit.
TEST(PlanCli, PrintsAPlanAndRefusesAClientThatCannotHoldItsPart) {
  const std::string model = std::string(LARQL_SOURCE_DIR) + "/models/demo";
  const Output ok = larql("plan " + model + " --machines a=1G,b=1G --parallel 2 --json");
  ASSERT_EQ(ok.status, 0) << ok.out;
  const auto plan = nlohmann::json::parse(ok.out);
  EXPECT_EQ(plan["map"], "0-2=http://a:9001,3-5=http://b:9001");
  EXPECT_EQ(plan["split"], "layers");
  EXPECT_EQ(plan["client_kv_bytes"].get<uint64_t>() % (512 * 2), 0u);
  const Output text = larql("plan " + model + " --machines a=1G,b=1G");
  ASSERT_EQ(text.status, 0) << text.out;
  EXPECT_NE(text.out.find("larql serve " + model + " --host 0.0.0.0 --port 9001 --layers 3-5"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("larql router --host 0.0.0.0 --port 9000 --shards \"0-2=http://a:9001,3-5=http://b:9001\""),
            std::string::npos)
      << text.out;
  const Output tight = larql("plan " + model + " --machines a=1G --client 10M");
  EXPECT_EQ(tight.status, 1);
  EXPECT_NE(tight.out.find("does not fit its 10.0 MiB"), std::string::npos) << tight.out;
  const Output bad = larql("plan " + model + " --machines a");
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.out.find("NAME=MEMORY"), std::string::npos) << bad.out;
}

}  // namespace
}  // namespace larql
