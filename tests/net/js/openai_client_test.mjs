// loom-gateway driven by the official OpenAI JavaScript client, unchanged but for baseURL: completions and
// chat completions, whole and streamed, log-probabilities and n choices, JSON under a response_format schema,
// the model list, embeddings (a string and a list, base64 as the client asks by default, and float), a refused
// request and a wrong API key. Then the gateway is stopped with SIGTERM and must exit 0.
//
//   node openai_client_test.mjs PATH/TO/loom-gateway PATH/TO/aidreams260K.gguf
//
// Run by ctest through openai_js.cmake (label net_clients), which installs the pinned client first.
import assert from "node:assert/strict";
import OpenAI from "openai";
import { startGateway as launch, stopGateway } from "./gateway.mjs";

const [gatewayPath, modelPath] = process.argv.slice(2);
if (!gatewayPath || !modelPath) {
  console.error("usage: node openai_client_test.mjs LOOM_GATEWAY MODEL.gguf");
  process.exit(2);
}

const API_KEY = "test-key";

// The gateway serving aidreams260K in ChatML (it has no template of its own), with an API key.
function startGateway() {
  return launch(gatewayPath, ["--model", modelPath, "--chat-template", "chatml", "--api-key", API_KEY]);
}

function client(port, apiKey = API_KEY) {
  return new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey, maxRetries: 0, timeout: 60000 });
}

function checkUsage(usage, what) {
  assert.ok(usage, `${what}: usage is missing`);
  assert.ok(usage.prompt_tokens > 0, `${what}: prompt_tokens ${usage.prompt_tokens}`);
  assert.equal(usage.total_tokens, usage.prompt_tokens + usage.completion_tokens, `${what}: total_tokens`);
}

const greedy = { model: "aidreams260K", temperature: 0, max_tokens: 24 };

async function completions(openai) {
  const whole = await openai.completions.create({ ...greedy, prompt: "Once upon a time" });
  assert.equal(whole.object, "text_completion");
  assert.match(whole.id, /^cmpl-/);
  assert.equal(whole.choices.length, 1);
  const text = whole.choices[0].text;
  assert.equal(typeof text, "string");
  assert.ok(text.length > 0, "the completion is empty");
  assert.ok(["stop", "length"].includes(whole.choices[0].finish_reason), whole.choices[0].finish_reason);
  checkUsage(whole.usage, "completion");

  const stream = await openai.completions.create({ ...greedy, prompt: "Once upon a time", stream: true });
  let streamed = "";
  let finished = 0;
  for await (const chunk of stream) {
    assert.equal(chunk.object, "text_completion");
    for (const choice of chunk.choices) {
      streamed += choice.text;
      if (choice.finish_reason) finished += 1;
    }
  }
  assert.equal(streamed, text, "the streamed completion differs from the whole one");
  assert.equal(finished, 1, "chunks with a finish_reason");
  console.log(`completions: ${JSON.stringify(text)}`);
}

async function chat(openai) {
  const messages = [
    { role: "system", content: "You tell stories." },
    { role: "user", content: [{ type: "text", text: "Once upon a time" }] },
  ];
  const whole = await openai.chat.completions.create({ ...greedy, messages });
  assert.equal(whole.object, "chat.completion");
  assert.match(whole.id, /^chatcmpl-/);
  assert.equal(whole.choices[0].message.role, "assistant");
  const text = whole.choices[0].message.content;
  assert.equal(typeof text, "string");
  assert.ok(["stop", "length"].includes(whole.choices[0].finish_reason), whole.choices[0].finish_reason);
  checkUsage(whole.usage, "chat");

  const stream = await openai.chat.completions.create({
    ...greedy,
    messages,
    stream: true,
    stream_options: { include_usage: true },
  });
  let streamed = "";
  let role = null;
  let finished = 0;
  let usage = null;
  for await (const chunk of stream) {
    assert.equal(chunk.object, "chat.completion.chunk");
    if (chunk.usage) usage = chunk.usage;
    for (const choice of chunk.choices) {
      if (choice.delta.role) role = choice.delta.role;
      if (choice.delta.content) streamed += choice.delta.content;
      if (choice.finish_reason) finished += 1;
    }
  }
  assert.equal(role, "assistant");
  assert.equal(streamed, text, "the streamed chat answer differs from the whole one");
  assert.equal(finished, 1, "chunks with a finish_reason");
  checkUsage(usage, "chat stream usage");
  assert.equal(usage.completion_tokens, whole.usage.completion_tokens);
  console.log(`chat: ${JSON.stringify(text)}`);
}

// logprobs with top_logprobs, whole and streamed: greedy, so each token is its position's most likely one;
// the streamed entries are the whole answer's.
async function logprobs(openai) {
  const request = { ...greedy, max_tokens: 8, messages: [{ role: "user", content: "Once upon a time" }], logprobs: true, top_logprobs: 3 };
  const whole = await openai.chat.completions.create(request);
  const content = whole.choices[0].logprobs.content;
  assert.ok(content.length > 0, "no logprobs entries");
  for (const entry of content) {
    assert.equal(entry.top_logprobs.length, 3, JSON.stringify(entry));
    assert.equal(entry.top_logprobs[0].token, entry.token, JSON.stringify(entry));
    assert.ok(entry.logprob <= 0, JSON.stringify(entry));
    if (!entry.token.includes("\uFFFD")) {
      assert.deepEqual(entry.bytes, [...Buffer.from(entry.token, "utf8")], "bytes of a whole-character token");
    }
    const mass = entry.top_logprobs.reduce((sum, alternative) => sum + Math.exp(alternative.logprob), 0);
    assert.ok(mass <= 1 + 1e-9, `alternatives' probabilities sum to ${mass}`);
  }
  const streamed = [];
  for await (const chunk of await openai.chat.completions.create({ ...request, stream: true })) {
    for (const choice of chunk.choices) streamed.push(...(choice.logprobs?.content ?? []));
  }
  assert.deepEqual(streamed, content, "the streamed logprobs differ from the whole answer's");
  console.log(`logprobs: ${content.map((entry) => `${JSON.stringify(entry.token)} ${entry.logprob.toFixed(3)}`).join(", ")}`);
}

// n = 2 with a seed: two choices, whole and streamed (each chunk under its choice's index), the same texts.
async function choices(openai) {
  const request = { model: "aidreams260K", temperature: 1, seed: 5, max_tokens: 16, prompt: "Once upon a time" };
  const whole = await openai.completions.create({ ...request, n: 2 });
  assert.deepEqual(whole.choices.map((choice) => choice.index), [0, 1]);
  const streamed = ["", ""];
  for await (const chunk of await openai.completions.create({ ...request, n: 2, stream: true })) {
    for (const choice of chunk.choices) streamed[choice.index] += choice.text;
  }
  assert.deepEqual(streamed, whole.choices.map((choice) => choice.text), "streamed choices differ from the whole ones");
  const single = await openai.completions.create(request);
  assert.equal(whole.choices[0].text, single.choices[0].text, "choice 0 differs from the n = 1 answer with the same seed");
  assert.equal(whole.usage.prompt_tokens, single.usage.prompt_tokens, "the prompt is counted once");
  console.log(`choices: ${JSON.stringify(whole.choices.map((choice) => choice.text))}`);
}

// response_format with a JSON Schema: whatever the tiny model would say, the answer parses and follows it.
async function structured(openai) {
  const schema = {
    type: "object",
    additionalProperties: false,
    required: ["answer", "n"],
    properties: { answer: { enum: ["yes", "no"] }, n: { type: "integer", minimum: 0, maximum: 9 } },
  };
  const request = {
    ...greedy,
    max_tokens: 64,
    messages: [{ role: "user", content: "Answer as JSON." }],
    response_format: { type: "json_schema", json_schema: { name: "answer", strict: true, schema } },
  };
  const whole = await openai.chat.completions.create(request);
  assert.equal(whole.choices[0].finish_reason, "stop", JSON.stringify(whole.choices[0]));
  const value = JSON.parse(whole.choices[0].message.content);
  assert.deepEqual(Object.keys(value).sort(), ["answer", "n"]);
  assert.ok(["yes", "no"].includes(value.answer), JSON.stringify(value));
  assert.ok(Number.isInteger(value.n) && value.n >= 0 && value.n <= 9, JSON.stringify(value));

  let streamed = "";
  for await (const chunk of await openai.chat.completions.create({ ...request, stream: true })) {
    for (const choice of chunk.choices) streamed += choice.delta.content ?? "";
  }
  assert.equal(streamed, whole.choices[0].message.content, "the streamed JSON differs from the whole one");

  await assert.rejects(
    openai.chat.completions.create({
      ...request,
      response_format: { type: "json_schema", json_schema: { name: "bad", schema: { type: "integer", multipleOf: 2 } } },
    }),
    (error) => {
      assert.equal(error.status, 400);
      assert.equal(error.param, "response_format.json_schema.schema");
      return true;
    },
  );
  console.log(`structured: ${whole.choices[0].message.content}`);
}

async function models(openai) {
  const list = await openai.models.list();
  assert.ok(list.data.length >= 1, "no models listed");
  for (const model of list.data) assert.equal(typeof model.id, "string");
  console.log(`models: ${list.data.map((model) => model.id).join(", ")}`);
}

// The client asks for base64 unless told otherwise and decodes it to floats itself; float is asked here too.
async function embeddings(openai) {
  const unitNorm = (vector, what) => {
    const norm = Math.sqrt(vector.reduce((sum, v) => sum + v * v, 0));
    assert.ok(Math.abs(norm - 1) < 1e-5, `${what}: norm ${norm}`);
  };
  const one = await openai.embeddings.create({ model: "aidreams260K", input: "a cat on the mat" });
  assert.equal(one.object, "list");
  assert.equal(one.data.length, 1);
  assert.equal(one.data[0].embedding.length, 64, "the model's embedding length");
  unitNorm(one.data[0].embedding, "string input");
  assert.ok(one.usage.prompt_tokens > 0);
  const list = await openai.embeddings.create({
    model: "aidreams260K", input: ["a cat on the mat", "the moon"], encoding_format: "float",
  });
  assert.deepEqual(list.data.map((d) => d.index), [0, 1]);
  for (const item of list.data) {
    assert.equal(item.embedding.length, 64);
    unitNorm(item.embedding, `list input ${item.index}`);
  }
  const again = await openai.embeddings.create({
    model: "aidreams260K", input: "a cat on the mat", encoding_format: "float",
  });
  assert.deepEqual(Array.from(again.data[0].embedding), Array.from(one.data[0].embedding),
    "base64 and float give the same vector");
  list.data[0].embedding.forEach((v, i) => assert.ok(Math.abs(v - one.data[0].embedding[i]) < 1e-5, `list[0][${i}]`));
  console.log(`embeddings: ${list.data.length} vectors of ${list.data[0].embedding.length}`);
}

async function refusals(openai, port) {
  await assert.rejects(
    openai.completions.create({ ...greedy, prompt: "x", temperature: 1000 }),
    (error) => {
      assert.ok(error instanceof OpenAI.BadRequestError, `expected BadRequestError, got ${error}`);
      assert.equal(error.status, 400);
      assert.equal(error.param, "temperature");
      return true;
    },
  );
  await assert.rejects(
    client(port, "wrong-key").chat.completions.create({ ...greedy, messages: [{ role: "user", content: "hi" }] }),
    (error) => {
      assert.ok(error instanceof OpenAI.AuthenticationError, `expected AuthenticationError, got ${error}`);
      assert.equal(error.status, 401);
      return true;
    },
  );
  console.log("refusals: 400 BadRequestError, 401 AuthenticationError");
}

const gateway = startGateway();
let failed = false;
try {
  const port = await gateway.ready;
  const openai = client(port);
  await completions(openai);
  await chat(openai);
  await logprobs(openai);
  await choices(openai);
  await structured(openai);
  await models(openai);
  await embeddings(openai);
  await refusals(openai, port);
} catch (error) {
  failed = true;
  console.error("FAILED:", error);
}

const stopProblem = await stopGateway(gateway);
if (stopProblem) {
  failed = true;
  console.error(stopProblem);
}
if (failed) process.exit(1);
console.log("PASSED: the official OpenAI client works against loom-gateway");
