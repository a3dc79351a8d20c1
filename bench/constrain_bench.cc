// What structured output costs per decode step: the time to compute the allowed-token mask
// (the vocabulary trie walked from the JSON matcher's state) at every step of a JSON answer,
// through any tokenizer larql reads. The answer is a canned value of the structured-output
// test's schema, tokenized by the tokenizer itself, so the steps are those a model writing
// it would take: structure, keys, a long free string, numbers, an enum array.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "constrain/token_mask.h"
#include "model/loader.h"
#include "model/tokenizer.h"

namespace {

constexpr const char* kSchema = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string"},
    "age": {"type": "integer"},
    "colours": {"type": "array", "items": {"enum": ["red", "green", "blue"]}},
    "home": {"type": "object", "properties": {"city": {"type": "string"}, "zip": {"type": ["integer", "null"]}},
             "required": ["city"]},
    "story": {"type": "string"}
  },
  "required": ["name", "age", "colours", "home", "story"]
})";

constexpr const char* kAnswer =
    "{\n  \"name\": \"Ada Lovelace\",\n  \"age\": 36,\n  \"colours\": [\"green\", \"blue\"],\n"
    "  \"home\": {\"city\": \"London\", \"zip\": null},\n"
    "  \"story\": \"She wrote the first published algorithm for Babbage's Analytical Engine, and saw that "
    "such a machine could compose music or handle any symbols, not only numbers: \\\"the engine weaves "
    "algebraic patterns\\\". Café, naïve, 東京 — text of every kind.\"\n}";

double micros(std::chrono::steady_clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Structured output: the allowed-token mask's cost per decode step"};
  std::string path;
  int reps = 5;
  app.add_option("tokenizer", path, "tokenizer.json, a llama2.c tokenizer file, or a model")->required();
  app.add_option("--reps", reps, "passes over the answer; the median step time of each step is reported")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  auto tok = larql::load_tokenizer_file(path);
  if (!tok) {
    std::fprintf(stderr, "constrain_bench: %s\n", tok.error().message.c_str());
    return 2;
  }
  auto t0 = std::chrono::steady_clock::now();
  const larql::TokenTrie trie = larql::TokenTrie::of(**tok);
  const double build_ms = micros(std::chrono::steady_clock::now() - t0) / 1e3;
  auto grammar = larql::JsonGrammar::from_schema(nlohmann::ordered_json::parse(kSchema));
  if (!grammar) {
    std::fprintf(stderr, "constrain_bench: %s\n", grammar.error().message.c_str());
    return 2;
  }
  // The answer's tokens, as the tokenizer splits it (without BOS and friends).
  std::vector<int> ids;
  for (int id : (*tok)->encode(kAnswer))
    if ((*tok)->token_bytes(id).value_or("").size() > 0) ids.push_back(id);
  std::vector<std::vector<double>> step_us(ids.size());
  std::vector<size_t> allowed_count(ids.size());
  std::vector<uint8_t> allowed;
  for (int rep = 0; rep < reps; ++rep) {
    larql::JsonMatcher m(**grammar);
    for (size_t i = 0; i < ids.size(); ++i) {
      const auto start = std::chrono::steady_clock::now();
      trie.allowed(m, 4096, allowed);
      step_us[i].push_back(micros(std::chrono::steady_clock::now() - start));
      allowed_count[i] = size_t(std::count(allowed.begin(), allowed.end(), 1));
      if (!allowed[size_t(ids[i])] || !m.feed(trie.bytes(ids[i]))) {
        std::fprintf(stderr, "constrain_bench: the answer's token %zu (%d) is not allowed: tokenizer and matcher disagree\n", i, ids[i]);
        return 1;
      }
    }
    if (!m.closed()) {
      std::fprintf(stderr, "constrain_bench: the answer did not close the value\n");
      return 1;
    }
  }
  std::vector<double> medians;
  double in_string = 0, structural = 0;
  size_t n_string = 0, n_structural = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    std::sort(step_us[i].begin(), step_us[i].end());
    const double med = step_us[i][step_us[i].size() / 2];
    medians.push_back(med);
    // Steps where more than half the vocabulary may come are inside free strings.
    if (allowed_count[i] * 2 > trie.vocab()) in_string += med, ++n_string;
    else structural += med, ++n_structural;
  }
  double total = 0;
  for (double m : medians) total += m;
  std::sort(medians.begin(), medians.end());
  std::printf("tokenizer %s: vocabulary %zu, trie %zu nodes built in %.0f ms\n", path.c_str(), trie.vocab(), trie.nodes(), build_ms);
  std::printf("answer: %zu tokens; mask per step (median of %d): mean %.1f us, p50 %.1f us, p90 %.1f us, max %.1f us\n",
              ids.size(), reps, total / double(ids.size()), medians[medians.size() / 2], medians[medians.size() * 9 / 10],
              medians.back());
  std::printf("  in free strings: %zu steps, mean %.1f us; elsewhere: %zu steps, mean %.1f us\n", n_string,
              n_string ? in_string / double(n_string) : 0.0, n_structural, n_structural ? structural / double(n_structural) : 0.0);
  return 0;
}
