#include "api/logprobs_json.h"

#include <cmath>

namespace larql {
namespace {

using nlohmann::json;

// A token's bytes: exact where its text, a byte of a longer character, is not a string.
json bytes_of(const std::string& text) {
  json out = json::array();
  for (unsigned char c : text) out.push_back(int(c));
  return out;
}

}  // namespace

json chat_logprobs(const Tokenizer& tokenizer, std::span<const TokenLogprobs> tokens) {
  json out = json::array();
  for (const TokenLogprobs& t : tokens) {
    const std::string text = tokenizer.token_text(t.token);
    json top = json::array();
    for (const auto& [id, logprob] : t.top) {
      const std::string alternative = tokenizer.token_text(id);
      top.push_back({{"token", alternative}, {"logprob", logprob}, {"bytes", bytes_of(alternative)}});
    }
    out.push_back({{"token", text}, {"logprob", t.logprob}, {"bytes", bytes_of(text)}, {"top_logprobs", top}});
  }
  return out;
}

json completion_logprobs(const Tokenizer& tokenizer, std::span<const TokenLogprobs> tokens, size_t& text_offset) {
  json out{{"tokens", json::array()}, {"token_logprobs", json::array()}, {"top_logprobs", json::array()}, {"text_offset", json::array()}};
  for (const TokenLogprobs& t : tokens) {
    const std::string text = tokenizer.token_text(t.token);
    out["tokens"].push_back(text);
    // An echoed prompt's first token has no log-probability (NaN here): null, as OpenAI's.
    const bool scored = !std::isnan(t.logprob);
    out["token_logprobs"].push_back(scored ? json(t.logprob) : json());
    json top = json::object();
    for (const auto& [id, logprob] : t.top) top[tokenizer.token_text(id)] = logprob;
    out["top_logprobs"].push_back(scored ? top : json());
    out["text_offset"].push_back(text_offset);
    text_offset += text.size();
  }
  return out;
}

}  // namespace larql
