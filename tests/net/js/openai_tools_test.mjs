// Tool calling and reasoning through loom-gateway, driven by the official OpenAI JavaScript client unchanged
// but for baseURL. The model is a random-weight qwen2 written by `loom synth` with the GPT-2 vocabulary and,
// as its own tokenizer.chat_template, Qwen 2.5's real template (Hermes-style <tool_call> calls): so the
// gateway renders the model's template by default, and with tool_choice "required" or a named function the
// grammar makes even random weights answer with a well-formed call whose arguments follow the tool's schema.
// A second gateway serves the same file with --chat-template-file DeepSeek R1's template, whose generation
// prompt opens <think>: the reply is reasoning, returned as reasoning_content (reasoning_format none: content).
//
//   node openai_tools_test.mjs PATH/TO/loom-gateway PATH/TO/loom SHARED_DIR
//
// Run by ctest through openai_js.cmake (label net_clients), which installs the pinned client first.
import { execFileSync } from "node:child_process";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { startGateway as launch } from "./gateway.mjs";

const [gatewayPath, loomPath, sharedDir] = process.argv.slice(2);
if (!gatewayPath || !loomPath || !sharedDir) {
  console.error("usage: node openai_tools_test.mjs LOOM_GATEWAY LOOM SHARED_DIR");
  process.exit(2);
}

const API_KEY = "test-key";
const templates = join(sharedDir, "templates", "templates");

function startGateway(args) {
  return launch(gatewayPath, [...args, "--api-key", API_KEY]);
}

async function stopGateway(gateway) {
  gateway.child.kill("SIGTERM");
  const timer = setTimeout(() => gateway.child.kill("SIGKILL"), 30000);
  const { code, signal } = await gateway.exited;
  clearTimeout(timer);
  return code === 0 ? null : `the gateway exited with code ${code}, signal ${signal}`;
}

function client(port) {
  return new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: API_KEY, maxRetries: 0, timeout: 60000 });
}

const weather = {
  type: "function",
  function: {
    name: "get_weather",
    description: "The weather forecast for a city",
    parameters: {
      type: "object",
      properties: {
        city: { type: "string", enum: ["Paris", "Tokyo", "Lima"] },
        days: { type: "integer", minimum: 1, maximum: 7 },
      },
      required: ["city", "days"],
      additionalProperties: false,
    },
  },
};
const time = {
  type: "function",
  function: {
    name: "get_time",
    description: "The local time in a city",
    parameters: {
      type: "object",
      properties: { city: { type: "string", enum: ["Paris", "Lima"] } },
      required: ["city"],
      additionalProperties: false,
    },
  },
};
const greedy = { model: "tools", temperature: 0, max_tokens: 96 };

function checkWeatherArguments(text) {
  const args = JSON.parse(text);
  assert.deepEqual(Object.keys(args), ["city", "days"], text);
  assert.ok(["Paris", "Tokyo", "Lima"].includes(args.city), text);
  assert.ok(Number.isInteger(args.days) && args.days >= 1 && args.days <= 7, text);
}

// tool_choice required: the whole answer is a call, then the same request streamed gives the same call in pieces.
async function requiredCall(openai) {
  // One call: with parallel calls allowed, random weights would go on calling until max_tokens.
  const request = {
    ...greedy,
    messages: [{ role: "user", content: "Weather in Paris?" }],
    tools: [weather],
    tool_choice: "required",
    parallel_tool_calls: false,
  };
  const whole = await openai.chat.completions.create(request);
  const choice = whole.choices[0];
  assert.equal(choice.finish_reason, "tool_calls", JSON.stringify(choice));
  assert.ok(!choice.message.content, `content beside the call: ${JSON.stringify(choice.message.content)}`);
  assert.equal(choice.message.tool_calls.length, 1, JSON.stringify(choice.message));
  const call = choice.message.tool_calls[0];
  assert.equal(call.type, "function");
  assert.match(call.id, /^call_[A-Za-z0-9]{24}$/);
  assert.equal(call.function.name, "get_weather");
  checkWeatherArguments(call.function.arguments);

  const calls = [];
  let content = "";
  let finish = null;
  for await (const chunk of await openai.chat.completions.create({ ...request, stream: true })) {
    for (const c of chunk.choices) {
      content += c.delta.content ?? "";
      if (c.finish_reason) finish = c.finish_reason;
      for (const delta of c.delta.tool_calls ?? []) {
        if (delta.index === calls.length) {
          assert.ok(delta.id && delta.function?.name, `a call's first delta names it: ${JSON.stringify(delta)}`);
          assert.equal(delta.type, "function");
          calls.push({ name: delta.function.name, arguments: "" , pieces: 0 });
        }
        assert.ok(delta.index < calls.length, `a delta for call ${delta.index} before its first`);
        if (delta.function?.arguments) {
          calls[delta.index].arguments += delta.function.arguments;
          calls[delta.index].pieces += 1;
        }
      }
    }
  }
  assert.equal(finish, "tool_calls");
  assert.equal(content, "", "content streamed beside the call");
  assert.equal(calls.length, 1);
  assert.equal(calls[0].name, "get_weather");
  assert.equal(calls[0].arguments, call.function.arguments, "streamed arguments differ from the whole answer's");
  assert.ok(calls[0].pieces > 1, `the arguments came in ${calls[0].pieces} piece(s)`);
  console.log(`required: ${call.function.name}(${call.function.arguments}), streamed in ${calls[0].pieces} pieces`);
  return call;
}

async function namedCall(openai) {
  const whole = await openai.chat.completions.create({
    ...greedy,
    messages: [{ role: "user", content: "What time is it in Lima?" }],
    tools: [weather, time],
    tool_choice: { type: "function", function: { name: "get_time" } },
    parallel_tool_calls: false,
  });
  const call = whole.choices[0].message.tool_calls[0];
  assert.equal(call.function.name, "get_time");
  assert.ok(["Paris", "Lima"].includes(JSON.parse(call.function.arguments).city), call.function.arguments);
  console.log(`named: ${call.function.name}(${call.function.arguments})`);
}

// The client sends the call back with its result: the answer is text (tool_choice none: no call wanted).
async function toolResult(openai, call) {
  const whole = await openai.chat.completions.create({
    ...greedy,
    max_tokens: 8,
    tools: [weather],
    tool_choice: "none",
    messages: [
      { role: "user", content: "Weather in Paris?" },
      { role: "assistant", content: null, tool_calls: [call] },
      { role: "tool", tool_call_id: call.id, content: JSON.stringify({ temperature: 21, sky: "clear" }) },
    ],
  });
  const choice = whole.choices[0];
  assert.ok(["stop", "length"].includes(choice.finish_reason), choice.finish_reason);
  assert.equal(typeof choice.message.content, "string");
  assert.equal(choice.message.tool_calls, undefined);
  console.log(`tool result answered: ${JSON.stringify(choice.message.content)}`);
}

async function refusals(openai) {
  await assert.rejects(
    openai.chat.completions.create({
      ...greedy,
      messages: [{ role: "user", content: "hi" }],
      tools: [weather],
      tool_choice: { type: "function", function: { name: "no_such_tool" } },
    }),
    (error) => {
      assert.equal(error.status, 400);
      assert.match(String(error.param), /tool_choice/);
      return true;
    },
  );
  console.log("refusals: an unknown function in tool_choice is a 400");
}

async function reasoning(openai) {
  const request = { ...greedy, max_tokens: 12, messages: [{ role: "user", content: "Why is the sky blue?" }] };
  const whole = await openai.chat.completions.create(request);
  const message = whole.choices[0].message;
  assert.equal(typeof message.reasoning_content, "string", JSON.stringify(message));
  assert.ok(message.reasoning_content.length > 0, "no reasoning_content");
  let reasoningText = "";
  let content = "";
  for await (const chunk of await openai.chat.completions.create({ ...request, stream: true })) {
    for (const c of chunk.choices) {
      reasoningText += c.delta.reasoning_content ?? "";
      content += c.delta.content ?? "";
    }
  }
  assert.equal(reasoningText, message.reasoning_content, "streamed reasoning differs from the whole answer's");
  assert.equal(content, message.content ?? "");

  const kept = await openai.chat.completions.create({ ...request, reasoning_format: "none" });
  assert.equal(kept.choices[0].message.reasoning_content, undefined);
  assert.equal(kept.choices[0].message.content, message.reasoning_content + (message.content ?? ""));
  console.log(`reasoning: ${JSON.stringify(message.reasoning_content)}`);
}

const work = mkdtempSync(join(tmpdir(), "loom-tools-"));
const model = join(work, "tools.gguf");
execFileSync(loomPath, [
  "synth", "--out", model, "--arch", "qwen2", "--dim", "64", "--ffn", "128", "--layers", "2", "--heads", "2",
  "--kv-heads", "1", "--context", "4096", "--type", "q8_0", "--seed", "7",
  "--vocab-from", join(sharedDir, "vocab", "ggml-vocab-gpt-2.gguf"),
  "--chat-template-file", join(templates, "Qwen-Qwen2.5-7B-Instruct.jinja"),
], { stdio: "inherit" });

let failed = false;
for (const [args, run] of [
  [["--model", model, "--model-id", "tools"], async (openai) => {
    const call = await requiredCall(openai);
    await namedCall(openai);
    await toolResult(openai, call);
    await refusals(openai);
  }],
  [["--model", model, "--model-id", "tools", "--chat-template-file", join(templates, "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja")],
    reasoning],
]) {
  const gateway = startGateway(args);
  try {
    await run(client(await gateway.ready));
  } catch (error) {
    failed = true;
    console.error("FAILED:", error, "\ngateway output:\n", gateway.output());
  }
  const problem = await stopGateway(gateway);
  if (problem) {
    failed = true;
    console.error(problem);
  }
}
rmSync(work, { recursive: true, force: true });
process.exit(failed ? 1 : 0);
