// Tool calls through OpenAI's official Node client (chatml, Hermes-style calls as Qwen writes
// them): a named tool_choice whole and a required one streamed, each call's arguments
// checked against the function's parameters by ajv; the call sent back with the tool's
// result (assistant tool_calls + a tool message), answered; tool_choice none answered in text.
//   node openai_tools.js BASE_URL API_KEY
// Prints JSON: {"named": {finish, calls}, "streamed": {finish, calls}, "arguments_valid",
// "round_trip": {finish, content}, "none": {finish, has_calls}}.
const OpenAI = require("openai");
const Ajv = require("ajv");
const [baseURL, apiKey] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 120000 });

const parameters = {
  type: "object",
  properties: { city: { type: "string", maxLength: 8 } },
  required: ["city"],
  additionalProperties: false,
};
// (Short: the demo model's context is 512 tokens and Qwen's tool preamble is long.)
const tools = [{ type: "function", function: { name: "weather", parameters } }];
const validate = new Ajv({ strict: true }).compile(parameters);

async function main() {
  const model = (await client.models.list()).data[0].id;
  const messages = [{ role: "user", content: "Oslo?" }];
  const out = { arguments_valid: true };
  const check = (calls) => {
    for (const c of calls) {
      let args;
      try {
        args = JSON.parse(c.function.arguments);
      } catch (e) {
        out.arguments_valid = false;
        continue;
      }
      if (c.function.name !== "weather" || !validate(args) || !c.id) out.arguments_valid = false;
    }
  };

  const named = await client.chat.completions.create({
    model, messages, tools, tool_choice: { type: "function", function: { name: "weather" } }, max_tokens: 120, temperature: 1, seed: 3,
  });
  out.named = { finish: named.choices[0].finish_reason, calls: named.choices[0].message.tool_calls || [],
                content: named.choices[0].message.content };
  check(out.named.calls);

  const calls = [];
  let finish = null;
  const stream = await client.chat.completions.create({
    model, messages, tools, tool_choice: "required", max_tokens: 120, temperature: 1, seed: 4, stream: true,
  });
  for await (const chunk of stream) {
    const choice = chunk.choices[0];
    if (!choice) continue;
    for (const d of choice.delta?.tool_calls || []) {
      if (!calls[d.index]) calls[d.index] = { id: d.id, type: d.type, function: { name: "", arguments: "" } };
      if (d.function?.name) calls[d.index].function.name += d.function.name;
      if (d.function?.arguments) calls[d.index].function.arguments += d.function.arguments;
    }
    if (choice.finish_reason) finish = choice.finish_reason;
  }
  out.streamed = { finish, calls };
  check(calls);

  const call = out.named.calls[0];
  const answer = await client.chat.completions.create({
    model, tools, max_tokens: 8, temperature: 0,
    messages: [...messages, { role: "assistant", content: null, tool_calls: [call] },
               { role: "tool", tool_call_id: call.id, content: "3C" }],
  });
  out.round_trip = { finish: answer.choices[0].finish_reason, content: answer.choices[0].message.content };

  const none = await client.chat.completions.create({ model, messages, tools, tool_choice: "none", max_tokens: 8, temperature: 0 });
  out.none = { finish: none.choices[0].finish_reason, has_calls: Boolean(none.choices[0].message.tool_calls) };
  console.log(JSON.stringify(out));
}

main().catch((e) => {
  console.error(String(e));
  process.exit(1);
});
