// How tokenizing a prompt's time grows with its length: text of words (and of one letter
// repeated) at doubling sizes through any tokenizer file larql reads, each timed best of
// three, with the time per character beside it so that growth beyond linear shows.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <random>
#include <string>

#include "best_time.h"
#include "model/loader.h"

int main(int argc, char** argv) {
  CLI::App app{"Tokenizer encode time against text length"};
  std::string path;
  size_t from = 10000, to = 640000;
  app.add_option("tokenizer", path, "tokenizer.json, a llama2.c tokenizer file, or a model")->required();
  app.add_option("--from", from, "shortest text, characters")->capture_default_str();
  app.add_option("--to", to, "longest text, characters (doubling from --from)")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  auto tok = larql::load_tokenizer_file(path);
  if (!tok) {
    std::fprintf(stderr, "tokenize_bench: %s\n", tok.error().message.c_str());
    return 2;
  }
  const char* words[] = {"the", "cat", "sat", "on", "a", "mat", "and", "Lily", "said", "hello"};
  for (const char* kind : {"words", "one letter"}) {
    for (size_t n = from; n <= to; n *= 2) {
      std::string text;
      std::mt19937 rng(1);
      while (text.size() < n) text += kind[0] == 'w' ? std::string(words[rng() % 10]) + " " : "a";
      size_t ids = 0;
      const double best = 1e3 * larql::bench::best_seconds(3, [&] { ids = (*tok)->encode(text).size(); });  // ms
      std::printf("%-10s %8zu chars %8zu ids %10.1f ms %8.1f ns/char\n", kind, text.size(), ids, best, 1e6 * best / double(text.size()));
    }
  }
  return 0;
}
