// Structured output through OpenAI's official Node client, checked by ajv (an independent
// JSON-schema validator): `rounds` chat requests of `n` choices each at temperature 1 with a
// json_schema (a free string, an integer, an enum array, a nested object), one streamed,
// one json_object, and a schema larql cannot follow (a 400 naming the keyword).
//   node openai_structured.js BASE_URL API_KEY ROUNDS N
// Prints JSON: {"completions", "invalid": [texts that fail], "finish_reasons": {reason: count},
// "streamed_valid", "object_valid", "refusal": {status, param, message}}.
const OpenAI = require("openai");
const Ajv = require("ajv");
const [baseURL, apiKey, rounds, n] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 120000 });

const schema = {
  type: "object",
  properties: {
    name: { type: "string", maxLength: 40 },
    age: { type: "integer" },
    colours: { type: "array", items: { enum: ["red", "green", "blue"] }, minItems: 1, maxItems: 3 },
    home: {
      type: "object",
      properties: { city: { type: "string" }, zip: { type: ["integer", "null"] } },
      required: ["city"],
      additionalProperties: false,
    },
  },
  required: ["name", "age", "colours", "home"],
  additionalProperties: false,
};
const validate = new Ajv({ strict: true }).compile(schema);

async function main() {
  const model = (await client.models.list()).data[0].id;
  const messages = [{ role: "user", content: "Describe a person of the book as JSON." }];
  const response_format = { type: "json_schema", json_schema: { name: "person", schema, strict: true } };
  const out = { completions: 0, invalid: [], finish_reasons: {} };
  const replies = [];
  for (let r = 0; r < Number(rounds); r += 2) {  // two requests at a time: their choices fit the queue
    const pair = [r, r + 1].filter((i) => i < Number(rounds)).map((i) => client.chat.completions.create({
      model, messages, response_format, temperature: 1, seed: 1000 + i * Number(n), n: Number(n), max_tokens: 96,
    }));
    replies.push(...(await Promise.all(pair)));
  }
  for (const reply of replies)
    for (const choice of reply.choices) {
      out.completions++;
      out.finish_reasons[choice.finish_reason] = (out.finish_reasons[choice.finish_reason] || 0) + 1;
      let value;
      try {
        value = JSON.parse(choice.message.content);
      } catch (e) {
        out.invalid.push(choice.message.content);
        continue;
      }
      if (!validate(value)) out.invalid.push(choice.message.content);
    }

  let streamed = "";
  const stream = await client.chat.completions.create({
    model, messages, response_format, temperature: 1, seed: 7, max_tokens: 96, stream: true,
  });
  for await (const chunk of stream) streamed += chunk.choices[0]?.delta?.content || "";
  try {
    out.streamed_valid = validate(JSON.parse(streamed));
  } catch (e) {
    out.streamed_valid = false;
  }
  out.streamed = streamed;

  const object = await client.chat.completions.create({
    model, messages, response_format: { type: "json_object" }, temperature: 1, seed: 8, max_tokens: 64,
  });
  try {
    const v = JSON.parse(object.choices[0].message.content);
    out.object_valid = typeof v === "object" && v !== null && !Array.isArray(v);
  } catch (e) {
    out.object_valid = false;
  }

  try {
    await client.chat.completions.create({
      model, messages, max_tokens: 8,
      response_format: { type: "json_schema", json_schema: { name: "x", schema: { type: "string", pattern: "^a+$" } } },
    });
    out.refusal = null;
  } catch (e) {
    out.refusal = { status: e.status, param: e.param ?? e.error?.param, message: e.error?.message ?? String(e) };
  }
  console.log(JSON.stringify(out));
}

main().catch((e) => {
  console.error(String(e));
  process.exit(1);
});
