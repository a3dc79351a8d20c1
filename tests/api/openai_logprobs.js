// Log-probabilities through OpenAI's official Node client: a completion of token ids with
// `logprobs`, whole and streamed; a chat completion with `logprobs` and `top_logprobs`, and
// a completion of the ids that chat prompt renders to, for comparison.
// And the prompt scored with the whole greedy answer appended, as evaluation harnesses
// score text: `echo` with `logprobs` and `max_tokens: 0`.
//   node openai_logprobs.js BASE_URL API_KEY PROMPT_IDS CHAT_MESSAGE CHAT_PROMPT_IDS MAX_TOKENS SCORED_IDS
// (ids comma-separated). Prints JSON: {"completion": logprobs, "streamed": {"tokens",
// "token_logprobs", "top_logprobs", "text_offset", "text"}, "chat": content entries,
// "chat_as_completion": logprobs, "scored": logprobs of the prompt and answer echoed}.
const OpenAI = require("openai");
const [baseURL, apiKey, promptIds, message, chatIds, maxTokens, scoredIds] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 60000 });
const ids = (s) => s.split(",").map(Number);

async function main() {
  const out = {};
  const model = (await client.models.list()).data[0].id;
  const common = { model, max_tokens: Number(maxTokens), temperature: 0 };

  const whole = await client.completions.create({ ...common, prompt: ids(promptIds), logprobs: 5 });
  out.completion = whole.choices[0].logprobs;
  out.completion_text = whole.choices[0].text;

  out.streamed = { tokens: [], token_logprobs: [], top_logprobs: [], text_offset: [], text: "" };
  const stream = await client.completions.create({ ...common, prompt: ids(promptIds), logprobs: 5, stream: true });
  for await (const chunk of stream) {
    const c = chunk.choices[0];
    out.streamed.text += c.text;
    if (!c.logprobs) continue;
    for (const key of ["tokens", "token_logprobs", "top_logprobs", "text_offset"]) out.streamed[key].push(...c.logprobs[key]);
  }

  const chat = await client.chat.completions.create({
    ...common, messages: [{ role: "user", content: message }], logprobs: true, top_logprobs: 5,
  });
  out.chat = chat.choices[0].logprobs.content;
  const plain = await client.chat.completions.create({ ...common, messages: [{ role: "user", content: message }] });
  out.chat_without = plain.choices[0].logprobs;
  const asCompletion = await client.completions.create({ ...common, prompt: ids(chatIds), logprobs: 5 });
  out.chat_as_completion = asCompletion.choices[0].logprobs;
  const scored = await client.completions.create({ model, prompt: ids(scoredIds), max_tokens: 0, echo: true, logprobs: 5 });
  out.scored = scored.choices[0].logprobs;
  out.scored_finish = scored.choices[0].finish_reason;
  console.log(JSON.stringify(out));
}

main().catch((e) => {
  console.error(String(e));
  process.exit(1);
});
