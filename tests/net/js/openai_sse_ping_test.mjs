// SSE keep-alive comments and the official OpenAI JavaScript client: loom-gateway with a 10 ms
// --sse-ping-interval-ms streams a completion whose long prompt prefills for many intervals, so the stream
// carries ": ping" lines before its first data. The client (given a fetch that keeps a copy of the bytes,
// to show the pings were there) reads the stream as usual: the same text as the request answered whole.
//
//   node openai_sse_ping_test.mjs PATH/TO/loom-gateway PATH/TO/synth11M-q8_0.gguf
//
// Run by ctest through openai_js.cmake (label net_clients), which installs the pinned client first.
import assert from "node:assert/strict";
import OpenAI from "openai";
import { startGateway } from "./gateway.mjs";

const [gatewayPath, modelPath] = process.argv.slice(2);
if (!gatewayPath || !modelPath) {
  console.error("usage: node openai_sse_ping_test.mjs LOOM_GATEWAY MODEL.gguf");
  process.exit(2);
}

// A fetch for the client that passes everything through and copies the response body's text into `raw`.
function recordingFetch(record) {
  return async (url, init) => {
    const response = await fetch(url, init);
    if (!response.body) return response;
    const [mine, theirs] = response.body.tee();
    record.done = (async () => {
      const decoder = new TextDecoder();
      for await (const chunk of mine) record.raw += decoder.decode(chunk, { stream: true });
    })();
    return new Response(theirs, { status: response.status, statusText: response.statusText, headers: response.headers });
  };
}

const gateway = startGateway(gatewayPath, ["--model", modelPath, "--threads", "1", "--compute-threads", "1",
                                           "--sse-ping-interval-ms", "10"]);
try {
  const port = await gateway.ready;
  const record = { raw: "", done: null };
  const openai = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: "unused", maxRetries: 0, timeout: 60000,
                              fetch: recordingFetch(record) });
  // About 1500 tokens that no earlier request cached: the whole prompt prefills.
  const request = { model: "synth11M", prompt: "tick ".repeat(300), max_tokens: 3, temperature: 0 };

  let streamedText = "";
  let finishReason = null;
  const stream = await openai.completions.create({ ...request, stream: true });
  for await (const chunk of stream) {
    streamedText += chunk.choices[0]?.text ?? "";
    finishReason = chunk.choices[0]?.finish_reason ?? finishReason;
  }
  await record.done;
  const firstData = record.raw.indexOf("data: ");
  const firstPing = record.raw.indexOf(": ping\n\n");
  assert.ok(firstPing >= 0 && firstPing < firstData, `no ping before the first data line:\n${record.raw.slice(0, 400)}`);
  assert.ok(finishReason, "the client saw no finish_reason");

  const whole = await openai.completions.create(request);
  assert.equal(streamedText, whole.choices[0].text, "the streamed text differs from the whole answer");
  console.log(`pings before the first data: ${record.raw.slice(0, firstData).split(": ping").length - 1}; ` +
              `text ${JSON.stringify(streamedText)}`);

  gateway.child.kill("SIGTERM");
  const { code } = await gateway.exited;
  assert.equal(code, 0, "loom-gateway did not exit 0 after SIGTERM");
  console.log("PASS");
} catch (error) {
  console.error(error);
  console.error("gateway output:\n" + gateway.output());
  gateway.child.kill("SIGKILL");
  process.exitCode = 1;
}
