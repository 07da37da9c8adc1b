// loom's defaults and extensions seen from the official OpenAI JavaScript client, and llama.cpp's utility
// routes with plain fetch: no max_tokens runs to the end of the context, a field loom cannot honour is a
// BadRequestError naming it unless the request is lenient (then a header lists it), a trimmed conversation
// says so (usage and header), /v1/models has meta, and /tokenize, /detokenize and /apply-template agree with
// the chat route.
//
//   node openai_extensions_test.mjs PATH/TO/loom-gateway PATH/TO/aidreams260K.gguf
//
// Run by ctest through openai_js.cmake (label net_clients), which installs the pinned client first.
import assert from "node:assert/strict";
import OpenAI from "openai";
import { startGateway as launch, stopGateway } from "./gateway.mjs";

const [gatewayPath, modelPath] = process.argv.slice(2);
if (!gatewayPath || !modelPath) {
  console.error("usage: node openai_extensions_test.mjs LOOM_GATEWAY MODEL.gguf");
  process.exit(2);
}

const API_KEY = "test-key";
const CONTEXT = 128;  // aidreams260K's

function client(port) {
  return new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: API_KEY, maxRetries: 0, timeout: 60000 });
}

async function post(port, path, body, apiKey = API_KEY) {
  const response = await fetch(`http://127.0.0.1:${port}${path}`, {
    method: "POST",
    headers: { "Content-Type": "application/json", Authorization: `Bearer ${apiKey}` },
    body: JSON.stringify(body),
  });
  return { status: response.status, body: await response.json() };
}

async function untilTheContextEnds(openai) {
  const whole = await openai.completions.create({ prompt: "Once upon a time", temperature: 0, ignore_eos: true });
  assert.equal(whole.choices[0].finish_reason, "length");
  assert.equal(whole.usage.prompt_tokens + whole.usage.completion_tokens, CONTEXT, JSON.stringify(whole.usage));
  console.log(`no max_tokens: ${whole.usage.completion_tokens} tokens, to the end of the context`);
}

async function unhonouredFields(openai) {
  const request = { messages: [{ role: "user", content: "Once upon a time" }], max_tokens: 2, mirostat: 2 };
  await assert.rejects(openai.chat.completions.create(request), (error) => {
    assert.ok(error instanceof OpenAI.BadRequestError, `expected BadRequestError, got ${error}`);
    assert.equal(error.param, "mirostat");
    assert.equal(error.type, "invalid_request_error");
    return true;
  });
  const { data, response } = await openai.chat.completions.create({ ...request, lenient: true }).withResponse();
  assert.equal(data.object, "chat.completion");
  assert.equal(response.headers.get("x-loom-ignored-fields"), "mirostat");
  console.log("mirostat: refused, then ignored with lenient");
}

async function trimmed(openai) {
  const messages = [];  // ChatML's markers take many tokens of this vocabulary: no system message
  for (let i = 0; i < 6; i += 1) {
    messages.push({ role: "user", content: "Who?" });
    messages.push({ role: "assistant", content: "A girl." });
  }
  messages.push({ role: "user", content: "What next?" });
  const { data, response } = await openai.chat.completions.create({ messages, max_tokens: 1 }).withResponse();
  const dropped = data.usage.trimmed_messages;
  assert.ok(dropped > 0 && dropped % 2 === 0 && dropped < messages.length - 2, `trimmed_messages ${dropped}`);
  assert.equal(response.headers.get("x-loom-trimmed-messages"), String(dropped));
  console.log(`trimmed: ${dropped} messages`);
}

async function llamaRoutes(openai, port) {
  assert.equal((await post(port, "/tokenize", { content: "x" }, "wrong-key")).status, 401);
  const content = "Once upon a time, there was a little girl.";
  const tokens = await post(port, "/tokenize", { content });
  assert.equal(tokens.status, 200, JSON.stringify(tokens.body));
  const text = await post(port, "/detokenize", { tokens: tokens.body.tokens });
  assert.equal(text.body.content, content);

  const messages = [{ role: "user", content: "Hi" }];
  const applied = await post(port, "/apply-template", { messages });
  assert.equal(applied.status, 200, JSON.stringify(applied.body));
  assert.equal(applied.body.prompt, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");  // ChatML
  const chat = await openai.chat.completions.create({ messages, max_tokens: 1 });
  assert.equal(applied.body.prompt_tokens, chat.usage.prompt_tokens);

  const list = await openai.models.list();
  const meta = list.data[0].meta;
  assert.equal(meta.n_vocab, 512);
  assert.equal(meta.n_ctx_train, CONTEXT);
  assert.equal(meta.architecture, "llama");
  console.log(`tokenize: ${tokens.body.tokens.length} tokens and back; apply-template: ${applied.body.prompt_tokens} tokens`);
}

const gateway = launch(gatewayPath, ["--model", modelPath, "--chat-template", "chatml", "--api-key", API_KEY]);
let failed = false;
try {
  const port = await gateway.ready;
  const openai = client(port);
  await untilTheContextEnds(openai);
  await unhonouredFields(openai);
  await trimmed(openai);
  await llamaRoutes(openai, port);
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
console.log("PASSED: loom's defaults and extensions through the official OpenAI client");
