// CORS in a real browser: headless Chromium opens a page served from ANOTHER origin (a small static server
// started here, on its own port) whose script calls loom-gateway's /v1/chat/completions with fetch, whole
// and streamed, with an API key (so the browser sends a preflight first) and an X-Request-Id it then reads
// back (an exposed header). From an origin listed in --cors-origins both work; from a second static
// server whose origin is not listed the same fetch fails with a TypeError (the browser blocks it).
//
//   node cors_test.mjs --gateway PATH --models DIR   (ctest runs it so, after npm ci)
import { spawn } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";

const { values: args } = parseArgs({
  options: {
    gateway: { type: "string" },
    models: { type: "string" },
    chromium: { type: "string", default: process.env.LOOM_CHROMIUM || "/usr/bin/chromium" },
  },
});

function fail(message) {
  console.error("FAIL: " + message);
  process.exit(1);
}
function check(condition, message) {
  if (!condition) throw new Error(message);
}

if (!args.gateway || !args.models) fail("give --gateway and --models");
if (!fs.existsSync(args.chromium)) {
  fail(`no browser at ${args.chromium}: install Debian's chromium package (apt-get install -y chromium)`);
}
let chromium;
try {
  ({ chromium } = await import("playwright-core"));
} catch {
  fail(`playwright-core is not installed: run 'npm ci' in ${path.dirname(new URL(import.meta.url).pathname)}`);
}

// A static server on a free loopback port: one empty HTML page, so the page's origin is http://127.0.0.1:PORT.
function startStaticServer() {
  const server = http.createServer((request, response) => {
    response.writeHead(200, { "Content-Type": "text/html; charset=utf-8" });
    response.end("<!doctype html><title>another origin</title><p>app</p>");
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server)));
}

// loom-gateway on a free port; resolves with its process and base URL once it prints its ready line.
function startGateway(extraArgs) {
  const child = spawn(args.gateway, ["--port", "0", "--threads", "1", "--compute-threads", "1", ...extraArgs],
                      { stdio: ["ignore", "pipe", "pipe"] });
  const record = { child, log: "" };
  record.exited = new Promise((resolve) => child.on("exit", (code, signal) => resolve({ code, signal })));
  record.ready = new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("loom-gateway printed no ready line within 60 s:\n" + record.log)), 60000);
    const onData = (chunk) => {
      record.log += chunk.toString();
      const match = /ready to serve on http:\/\/[^\s:]+:(\d+)/.exec(record.log);
      if (match) {
        clearTimeout(timer);
        resolve(`http://127.0.0.1:${match[1]}/`);
      }
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", onData);
    record.exited.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(new Error(`loom-gateway exited early (status ${code}, signal ${signal}):\n` + record.log));
    });
  });
  return record;
}

// Runs in the page: a whole and a streamed chat completion through fetch. Returns what the page could read,
// or the error's name and message when fetch failed.
async function callFromPage(page, gatewayUrl, key) {
  return page.evaluate(async ({ gatewayUrl, key }) => {
    const headers = { "Content-Type": "application/json", Authorization: `Bearer ${key}`, "X-Request-Id": "page-req-1" };
    const body = { model: "aidreams260K", messages: [{ role: "user", content: "Once upon a time" }], max_tokens: 8,
                   temperature: 0 };
    try {
      const whole = await fetch(gatewayUrl + "v1/chat/completions", { method: "POST", headers, body: JSON.stringify(body) });
      const wholeJson = await whole.json();
      const streamed = await fetch(gatewayUrl + "v1/chat/completions",
                                   { method: "POST", headers, body: JSON.stringify({ ...body, stream: true }) });
      const reader = streamed.body.getReader();
      const decoder = new TextDecoder();
      let text = "";
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        text += decoder.decode(value, { stream: true });
      }
      const data = text.split("\n").filter((line) => line.startsWith("data: ")).map((line) => line.slice(6));
      return {
        ok: true,
        wholeStatus: whole.status,
        wholeContent: wholeJson.choices?.[0]?.message?.content,
        requestId: whole.headers.get("X-Request-Id"),
        streamedStatus: streamed.status,
        streamedContent: data.filter((d) => d !== "[DONE]")
          .map((d) => JSON.parse(d).choices?.[0]?.delta?.content ?? "").join(""),
        lastData: data[data.length - 1],
      };
    } catch (error) {
      return { ok: false, name: error.name, message: error.message };
    }
  }, { gatewayUrl, key });
}

const userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), "loom-chromium-cors-"));
const servers = [];
let gateway = null;
let browser = null;
try {
  const listed = await startStaticServer();
  const unlisted = await startStaticServer();
  servers.push(listed, unlisted);
  const listedOrigin = `http://127.0.0.1:${listed.address().port}`;
  const unlistedOrigin = `http://127.0.0.1:${unlisted.address().port}`;
  const key = "cors-test-key";
  gateway = startGateway(["--model", path.join(args.models, "aidreams260K.gguf"), "--chat-template", "chatml",
                          "--api-key", key, "--cors-origins", `https://elsewhere.example,${listedOrigin}`]);
  const gatewayUrl = await gateway.ready;

  browser = await chromium.launchPersistentContext(userDataDir, {
    executablePath: args.chromium,
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
           "--disable-component-update", "--disable-sync"],
  });

  const page = await browser.newPage();
  await page.goto(listedOrigin + "/");
  const allowed = await callFromPage(page, gatewayUrl, key);
  check(allowed.ok, `from the listed origin ${listedOrigin} fetch failed: ${allowed.name}: ${allowed.message}`);
  check(allowed.wholeStatus === 200, `whole: status ${allowed.wholeStatus}`);
  check(typeof allowed.wholeContent === "string" && allowed.wholeContent.length > 0,
        `whole: no content (${JSON.stringify(allowed)})`);
  check(allowed.requestId === "page-req-1", `X-Request-Id not readable by the page: ${allowed.requestId}`);
  check(allowed.streamedStatus === 200, `streamed: status ${allowed.streamedStatus}`);
  check(allowed.lastData === "[DONE]", `streamed: the last data is ${allowed.lastData}`);
  check(allowed.streamedContent === allowed.wholeContent,
        `streamed text ${JSON.stringify(allowed.streamedContent)} != whole ${JSON.stringify(allowed.wholeContent)}`);
  console.log(`listed origin ${listedOrigin}: whole and streamed read (${JSON.stringify(allowed.wholeContent)})`);

  await page.goto(unlistedOrigin + "/");
  const blocked = await callFromPage(page, gatewayUrl, key);
  check(!blocked.ok && blocked.name === "TypeError",
        `from the unlisted origin ${unlistedOrigin} fetch should fail with a TypeError: ${JSON.stringify(blocked)}`);
  console.log(`unlisted origin ${unlistedOrigin}: blocked (${blocked.name}: ${blocked.message})`);
  await page.close();

  gateway.child.kill("SIGTERM");
  const { code } = await gateway.exited;
  check(code === 0, `loom-gateway exited with ${code} after SIGTERM`);
  console.log("PASS");
} catch (error) {
  console.error(error);
  if (gateway) console.error("gateway log:\n" + gateway.log);
  process.exitCode = 1;
  console.error("FAIL: " + error.message.split("\n")[0]);
} finally {
  if (browser) await browser.close();
  for (const server of servers) server.close();
  if (gateway && gateway.child.exitCode === null && gateway.child.signalCode === null) gateway.child.kill("SIGKILL");
  fs.rmSync(userDataDir, { recursive: true, force: true });
}
