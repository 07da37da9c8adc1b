// The web chat page in a real browser: headless Chromium (Debian's /usr/bin/chromium, driven by
// playwright-core, which downloads no browser) opens loom-gateway's page, sends a prompt, waits for the
// streamed reply in the page and saves screenshots; then Stop cancels a long generation on a second
// gateway that wants an API key (the page passes ?access_token= on to the WebSocket), and SIGTERM ends
// each gateway with exit status 0.
//
//   node chat_page_test.mjs --gateway PATH --models DIR --artifacts DIR   (ctest runs it so, after npm ci)
//   node chat_page_test.mjs --url http://127.0.0.1:PORT/ --artifacts DIR   (a server already running)
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";

const { values: args } = parseArgs({
  options: {
    gateway: { type: "string" },
    models: { type: "string" },
    artifacts: { type: "string", default: "test-artifacts" },
    url: { type: "string" },
    chromium: { type: "string", default: process.env.LOOM_CHROMIUM || "/usr/bin/chromium" },
  },
});

// Before anything is started: say what is missing and stop.
function fail(message) {
  console.error("FAIL: " + message);
  process.exit(1);
}
// Inside the test: throw, so that the browser and the gateways are stopped on the way out.
function check(condition, message) {
  if (!condition) throw new Error(message);
}

if (!fs.existsSync(args.chromium)) {
  fail(`no browser at ${args.chromium}: install Debian's chromium package (apt-get install -y chromium)`);
}
let chromium;
try {
  ({ chromium } = await import("playwright-core"));
} catch {
  fail(`playwright-core is not installed: run 'npm ci' in ${path.dirname(new URL(import.meta.url).pathname)}`);
}

const gateways = [];

// Starts loom-gateway on a free port and resolves with its base URL once it prints its ready line.
function startGateway(extraArgs) {
  const child = spawn(args.gateway, ["--port", "0", ...extraArgs], { stdio: ["ignore", "pipe", "pipe"] });
  const record = { child, exited: null, log: "" };
  gateways.push(record);
  const exited = new Promise((resolve) => child.on("exit", (code, signal) => resolve({ code, signal })));
  record.exited = exited;
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("loom-gateway printed no ready line within 60 s:\n" + record.log)), 60000);
    const onData = (chunk) => {
      record.log += chunk.toString();
      const match = /ready to serve on (http:\/\/[^\s:]+:(\d+))/.exec(record.log);
      if (match) {
        clearTimeout(timer);
        resolve(`http://127.0.0.1:${match[2]}/`);
      }
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", onData);
    child.on("error", (error) => { clearTimeout(timer); reject(error); });
    exited.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(new Error(`loom-gateway exited early (status ${code}, signal ${signal}):\n` + record.log));
    });
  });
}

async function stopGateway(record) {
  record.child.kill("SIGTERM");
  const timeout = new Promise((resolve) => setTimeout(() => resolve(null), 30000));
  const result = await Promise.race([record.exited, timeout]);
  if (result === null) {
    record.child.kill("SIGKILL");
    throw new Error("loom-gateway did not exit within 30 s of SIGTERM");
  }
  check(result.code === 0, `loom-gateway exited with status ${result.code} (signal ${result.signal}) after SIGTERM:\n${record.log}`);
}

function modelFile(name) {
  const file = path.join(args.models, name);
  check(fs.existsSync(file), `test model missing: ${file}`);
  return file;
}

// A fresh profile and no background traffic: Chromium's own network calls are refused here.
const userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), "loom-chromium-"));
const browser = await chromium.launchPersistentContext(userDataDir, {
  executablePath: args.chromium,
  headless: true,
  viewport: { width: 900, height: 640 },
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"],
});
fs.mkdirSync(args.artifacts, { recursive: true });

// Everything the page sends and receives over its WebSocket, as parsed JSON.
function recordFrames(page) {
  const frames = { sent: [], received: [] };
  page.on("websocket", (socket) => {
    socket.on("framesent", ({ payload }) => frames.sent.push(JSON.parse(payload)));
    socket.on("framereceived", ({ payload }) => frames.received.push(JSON.parse(payload)));
  });
  return frames;
}

async function sendPrompt(page, text) {
  await page.locator("#send:enabled").waitFor({ timeout: 20000 });  // a session is open
  await page.getByLabel("Message").fill(text);
  await page.locator("#send").click();
}

const lastAssistant = (page) => page.locator(".msg.assistant").last();

// Waits until the reply bubble has ended (done, or an error shown in it) and checks that it ended well.
async function waitForDone(page, what) {
  const reply = lastAssistant(page);
  await reply.and(page.locator('[data-state="done"], [data-state="error"]')).waitFor({ timeout: 30000 });
  if ((await reply.getAttribute("data-state")) === "error") {
    throw new Error(`${what} ended with an error in the page: ${await reply.locator(".error").textContent()}`);
  }
  return reply;
}

async function chatTest(baseUrl) {
  const page = await browser.newPage();
  page.on("console", (message) => { if (message.type() === "error") console.error("page console:", message.text()); });
  const frames = recordFrames(page);
  await page.goto(baseUrl + "?max_tokens=40");
  await sendPrompt(page, "Once upon a time");
  const reply = await waitForDone(page, "the first reply");
  await page.locator("#stop:disabled").waitFor({ timeout: 5000 });
  const text = (await reply.locator(".text").textContent()).trim();
  check(text, "the assistant's reply is empty");
  const streamed = frames.received.filter((f) => f.type === "token").map((f) => f.text).join("");
  check(streamed.trim() === text, `the page shows ${JSON.stringify(text)}, the server streamed ${JSON.stringify(streamed)}`);
  const generate = frames.sent.find((f) => f.type === "generate");
  check(generate && generate.params.max_tokens === 40 && generate.messages[0].content === "Once upon a time",
        "the page sent no generate frame with the prompt and max_tokens from the URL: " + JSON.stringify(frames.sent));
  const meta = await reply.locator(".meta").textContent();
  check(/tokens/.test(meta), `the done stats are missing: ${JSON.stringify(meta)}`);
  console.log(`reply (${text.length} chars): ${text}`);
  console.log(`stats: ${meta}`);
  const screenshot = path.resolve(args.artifacts, "chat_page.png");
  await page.screenshot({ path: screenshot });
  console.log("screenshot: " + screenshot);

  // A second turn in the same session, in a narrow window.
  await page.setViewportSize({ width: 380, height: 640 });
  await sendPrompt(page, "And then?");
  await waitForDone(page, "the second turn");
  const second = frames.sent.filter((f) => f.type === "generate")[1];
  check(second.session_id === generate.session_id, "the second turn left the session");
  const narrow = path.resolve(args.artifacts, "chat_page_narrow.png");
  await page.screenshot({ path: narrow });
  console.log("screenshot: " + narrow);
  await page.close();
}

// The demo notice, from a /health that says demo (answered by the test, not the gateway).
async function demoNoticeTest(baseUrl) {
  const page = await browser.newPage();
  await page.route("**/health", (route) =>
    route.fulfill({ contentType: "application/json", body: JSON.stringify({ status: "ok", phase: "ready", model: "demo", demo: true }) }));
  await page.goto(baseUrl);
  const notice = page.getByRole("alert");
  await notice.waitFor({ timeout: 10000 });
  check(/random weights/.test(await notice.textContent()), "the demo notice does not say the weights are random");
  await page.close();
}

async function stopTest(baseUrl, key) {
  const page = await browser.newPage();
  const frames = recordFrames(page);
  await page.goto(`${baseUrl}?access_token=${encodeURIComponent(key)}&max_tokens=1900`);
  await sendPrompt(page, "Tell me a very long story");
  const reply = lastAssistant(page);
  await reply.locator(".text").filter({ hasText: /\S/ }).waitFor({ timeout: 30000 });
  await page.locator("#stop").click();
  await waitForDone(page, "the stopped request");
  const generate = frames.sent.find((f) => f.type === "generate");
  check(frames.sent.some((f) => f.type === "cancel" && f.id === generate.id), "Stop sent no cancel frame");
  const done = frames.received.find((f) => f.type === "done" && f.id === generate.id);
  check(done.finish_reason === "cancelled", `the request ended with ${done.finish_reason}, not cancelled`);
  check(done.usage.completion_tokens < 1900, "the request ran to its max_tokens");
  check(await page.locator("#stop").isDisabled(), "Stop is still enabled after done");
  check(await page.locator("#send").isEnabled(), "Send is not enabled again after done");
  console.log(`stopped after ${done.usage.completion_tokens} tokens: ${await reply.locator(".meta").textContent()}`);
  await page.screenshot({ path: path.resolve(args.artifacts, "chat_page_stopped.png") });
  await page.close();
}

try {
  if (args.url) {
    await chatTest(args.url);
    await demoNoticeTest(args.url);
    await stopTest(args.url, "");  // needs a server slow enough that 1900 tokens outlast a click
  } else {
    check(args.gateway && args.models, "give --gateway and --models (or --url)");
    const tiny = await startGateway(["--model", modelFile("aidreams260K.gguf")]);
    await chatTest(tiny);
    await demoNoticeTest(tiny);
    await stopGateway(gateways[0]);
    // A model with a long context (2048) and enough work per token that a generation outlasts the click.
    const key = "browser-test-key";
    const big = await startGateway(["--model", modelFile("synth11M-q4_0.gguf"), "--api-key", key]);
    await stopTest(big, key);
    await stopGateway(gateways[1]);
  }
  console.log("PASS");
} catch (error) {
  console.error(error);
  for (const { log } of gateways) console.error("gateway log:\n" + log);
  process.exitCode = 1;
  console.error("FAIL: " + error.message.split("\n")[0]);
} finally {
  await browser.close();
  for (const { child } of gateways) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  fs.rmSync(userDataDir, { recursive: true, force: true });
}
