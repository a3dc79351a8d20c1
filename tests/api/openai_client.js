// Talks to `larql api` through OpenAI's official Node client (npm "openai"), as users'
// tools do: lists the models, streams a completion and a chat completion, and asks for
// one chat completion whole.
//   node openai_client.js BASE_URL API_KEY PROMPT CHAT_MESSAGE MAX_TOKENS
// Prints JSON: {"models": [...], "completion": text, "completion_finish": reason,
//               "chat_stream": text, "chat_stream_finish": reason, "chat": text, "usage": {...}}
const OpenAI = require("openai");
const [baseURL, apiKey, prompt, message, maxTokens] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 60000 });

async function main() {
  const out = {};
  const models = await client.models.list();
  out.models = models.data.map((m) => m.id);
  const model = out.models[0];

  out.completion = "";
  const stream = await client.completions.create({
    model, prompt, max_tokens: Number(maxTokens), temperature: 0, stream: true,
  });
  for await (const chunk of stream) {
    out.completion += chunk.choices[0].text;
    if (chunk.choices[0].finish_reason) out.completion_finish = chunk.choices[0].finish_reason;
  }

  out.chat_stream = "";
  const chat = await client.chat.completions.create({
    model, messages: [{ role: "user", content: message }], max_tokens: Number(maxTokens), temperature: 0, stream: true,
    stream_options: { include_usage: true },
  });
  for await (const chunk of chat) {
    if (chunk.usage) out.stream_usage = chunk.usage;
    if (!chunk.choices.length) continue;
    out.chat_stream += chunk.choices[0].delta.content || "";
    if (chunk.choices[0].finish_reason) out.chat_stream_finish = chunk.choices[0].finish_reason;
  }

  const whole = await client.chat.completions.create({
    model, messages: [{ role: "user", content: message }], max_tokens: Number(maxTokens), temperature: 0,
  });
  out.chat = whole.choices[0].message.content;
  out.usage = whole.usage;
  console.log(JSON.stringify(out));
}

main().catch((e) => {
  console.error(String(e));
  process.exit(1);
});
