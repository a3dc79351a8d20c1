// Any bytes as the body of /v1/completions and /v1/chat/completions: the parser answers a
// request or a 400 naming the parameter, and never throws (a throw would reach the
// server's catch-all as a 500). A parsed chat renders in every chat format or says why. A
// response_format schema that compiles is walked by the matcher with the body's own bytes
// (its state checked at every one).
#include <string>

#include "api/chat_template.h"
#include "api/openai_request.h"
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
    if (chat)
      for (const auto& info : larql::kChatFormats) (void)larql::render_chat(info.format, request.messages);
    if (request.grammar) {
      larql::JsonMatcher m(*request.grammar);
      for (size_t i = 0; i < size && m.feed(data[i]); ++i)
        larql::fuzz::check((m.bytes_to_close() == 0) == (m.closed() || m.accepting()));
      (void)m.takes_plain_text(3);
    }
  }
  return 0;
}
