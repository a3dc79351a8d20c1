// Any bytes as the body of /v1/completions and /v1/chat/completions: the parser answers a
// request or a 400 naming the parameter, and never throws (a throw would reach the
// server's catch-all as a 500). A parsed chat renders in every chat format, with its tools,
// or says why. A response_format schema that compiles is walked by the matcher with the
// body's own bytes (its state checked at every one), and so is each format's grammar of a
// call to the tools (Gemma 4's in its own syntax); the body's bytes are also read back as
// each format's answer (calls parsed, harmony's channels).
#include <string>

#include "api/chat_template.h"
#include "api/harmony.h"
#include "api/openai_request.h"
#include "api/tool_calls.h"
#include "constrain/json_matcher.h"
#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string body(reinterpret_cast<const char*>(data), size);
  for (bool chat : {false, true}) {
    auto parsed = larql::parse_completion_request(body, chat);
    if (const auto* error = std::get_if<larql::OpenAiError>(&parsed)) {
      larql::fuzz::check(error->status == 400 && !error->message.empty());
      continue;
    }
    const auto& request = std::get<larql::CompletionRequest>(parsed);
    larql::fuzz::check(request.chat == chat && (!chat || !request.messages.empty()));
    auto walk = [&](const larql::JsonGrammar& grammar) {
      larql::JsonMatcher m(grammar);
      for (size_t i = 0; i < size && m.feed(data[i]); ++i)
        larql::fuzz::check((m.bytes_to_close() == 0) == (m.closed() || m.accepting()));
      (void)m.takes_plain_text(3);
    };
    if (chat)
      for (const auto& info : larql::kChatFormats) {
        (void)larql::render_chat(info.format, request.messages, request.tools);
        const larql::ToolCallWords& words = info.tool_call;
        if (!words.supported()) continue;
        larql::ToolCallParser parser(words);
        (void)parser.push(body);
        (void)parser.finish();
        std::vector<larql::JsonGrammar::Function> functions;
        for (const auto& t : request.tools) {
          const auto& f = t["function"];
          const bool schema = f.contains("parameters") && f["parameters"].is_object();
          functions.push_back({f["name"].get<std::string>(), schema ? &f["parameters"] : nullptr});
        }
        if (functions.empty()) continue;
        auto grammar = larql::JsonGrammar::tool_call(functions, words.before, words.between, words.after, words.syntax);
        if (grammar) walk(**grammar);
      }
    if (request.grammar) walk(*request.grammar);
  }
  larql::HarmonyChannels channels;
  (void)channels.push(body);
  (void)channels.finish();
  return 0;
}
