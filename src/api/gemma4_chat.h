// Gemma 4's chat template (llama.cpp's models/templates/google-gemma-4-31B-it.jinja states
// it), rendered by hand: turns <|turn>role\n…<turn|>\n, a system turn for the first system
// message and the tools' declarations (<|tool>declaration:NAME{…}<tool|>, in Gemma 4's value
// syntax, constrain/gemma4_syntax.h), an assistant's calls as
// <|tool_call>call:NAME{key:value,…}<tool_call|> followed in the same turn by the results
// of the tool messages after it (<|tool_response>response:NAME{value:…}<tool_response|>),
// thinking off.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/chat_template.h"
#include "base/errors.h"

namespace larql {

// The prompt with its generation prompt (an empty thought channel), or, after tool
// results, nothing more: the model goes on in its turn. Tool messages take the name of the
// call whose id they give (tool_call_id), else of the call at their place.
Result<std::string> render_gemma4(const std::vector<ChatMessage>& messages, const std::vector<nlohmann::ordered_json>& tools);

// One tool's declaration as the template writes it (format_function_declaration), without
// the <|tool> marks. Errors name what it cannot write.
Result<std::string> gemma4_declaration(const nlohmann::ordered_json& tool);

}  // namespace larql
