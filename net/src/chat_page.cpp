#include "chat_page.hpp"

namespace loom::net {

namespace {

// The whole page: no external resources, so it works offline and under a strict CSP. Model text is only
// ever inserted with textContent. URL parameters the page reads: access_token (passed on to the WebSocket
// for servers with an API key), max_tokens, temperature and seed (sampling; tests use max_tokens).
constexpr std::string_view kChatPage = R"html(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>loom chat</title>
<style>
:root {
  --bg: #f5f6f8; --panel: #ffffff; --text: #1d2330; --muted: #667085; --border: #dde1e7;
  --accent: #3b5bdb; --accent-text: #ffffff; --user: #3b5bdb; --user-text: #ffffff;
  --bot: #ffffff; --error: #c92a2a; --error-bg: #fff0f0; --warn-bg: #fff8db; --warn: #7a5b00;
  color-scheme: light dark;
}
@media (prefers-color-scheme: dark) {
  :root {
    --bg: #15171c; --panel: #1d2027; --text: #e6e8ee; --muted: #98a1b3; --border: #2f343e;
    --accent: #5c7cfa; --user: #4263eb; --bot: #232731; --error: #ff8787; --error-bg: #3a1f22;
    --warn-bg: #3b3217; --warn: #ffd43b;
  }
}
* { box-sizing: border-box; }
html, body { height: 100%; margin: 0; }
body {
  display: flex; flex-direction: column; background: var(--bg); color: var(--text);
  font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
}
header {
  display: flex; align-items: center; gap: .75rem; padding: .6rem 1rem;
  background: var(--panel); border-bottom: 1px solid var(--border);
}
header h1 { font-size: 1.05rem; margin: 0; letter-spacing: .02em; }
#model { color: var(--muted); font-size: .85rem; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
#status { margin-left: auto; font-size: .8rem; color: var(--muted); display: flex; align-items: center; gap: .35rem; white-space: nowrap; }
#status::before { content: ""; width: .55rem; height: .55rem; border-radius: 50%; background: #adb5bd; }
#status[data-state="ready"]::before { background: #2f9e44; }
#status[data-state="offline"]::before { background: var(--error); }
button {
  font: inherit; border: 1px solid var(--border); background: var(--panel); color: var(--text);
  border-radius: .5rem; padding: .45rem .9rem; cursor: pointer;
}
button:hover:not(:disabled) { border-color: var(--accent); }
button:focus-visible, textarea:focus-visible { outline: 2px solid var(--accent); outline-offset: 1px; }
button:disabled { opacity: .45; cursor: default; }
button.primary { background: var(--accent); border-color: var(--accent); color: var(--accent-text); }
#notice {
  margin: .75rem auto 0; width: min(46rem, calc(100% - 2rem)); padding: .55rem .8rem; border-radius: .5rem;
  background: var(--warn-bg); color: var(--warn); font-size: .9rem;
}
main { flex: 1; overflow-y: auto; }
#transcript { width: min(46rem, 100%); margin: 0 auto; padding: 1rem; display: flex; flex-direction: column; gap: .8rem; }
#transcript:empty::before { content: "Say something to start the conversation."; color: var(--muted); text-align: center; margin-top: 2rem; }
.msg { max-width: 85%; display: flex; flex-direction: column; gap: .2rem; }
.msg .text {
  padding: .55rem .85rem; border-radius: .9rem; white-space: pre-wrap; overflow-wrap: anywhere;
  border: 1px solid var(--border); background: var(--bot);
}
.msg.user { align-self: flex-end; }
.msg.user .text { background: var(--user); color: var(--user-text); border-color: var(--user); border-bottom-right-radius: .25rem; }
.msg.assistant { align-self: flex-start; }
.msg.assistant .text { border-bottom-left-radius: .25rem; }
.msg.assistant[data-state="streaming"] .text::after { content: "\258D"; color: var(--accent); animation: blink 1s steps(1) infinite; }
.msg.assistant[data-state="streaming"] .text:empty::after { content: "\2026"; animation: none; }
@keyframes blink { 50% { opacity: 0; } }
.msg.assistant:not([data-state="streaming"]) .text:empty { display: none; }
.msg .meta { font-size: .75rem; color: var(--muted); padding: 0 .3rem; }
.msg.system { align-self: center; max-width: 95%; }
.msg.system .text { background: transparent; border-style: dashed; color: var(--muted); font-size: .85rem; }
.msg .error, .msg.error .text { color: var(--error); background: var(--error-bg); border-color: var(--error); }
.msg .error { font-size: .85rem; padding: .3rem .6rem; border: 1px solid; border-radius: .5rem; }
form {
  width: min(46rem, 100%); margin: 0 auto; padding: .75rem 1rem 1rem; display: flex; gap: .5rem; align-items: flex-end;
}
textarea {
  flex: 1; resize: none; min-height: 2.6rem; max-height: 12rem; padding: .55rem .75rem; font: inherit;
  color: var(--text); background: var(--panel); border: 1px solid var(--border); border-radius: .6rem;
}
#hint { margin: -.6rem auto .5rem; width: min(46rem, 100%); padding: 0 1.1rem; font-size: .75rem; color: var(--muted); }
.visually-hidden { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); white-space: nowrap; }
@media (max-width: 30rem) {
  header { flex-wrap: wrap; gap: .4rem .75rem; }
  #model { order: 3; flex-basis: 100%; }
  .msg { max-width: 95%; }
  form { padding: .5rem; }
  #hint { display: none; }
  button { padding: .45rem .65rem; }
}
</style>
</head>
<body>
<header>
  <h1>loom</h1>
  <span id="model">connecting…</span>
  <span id="status" role="status" data-state="connecting">connecting</span>
  <button id="new-chat" type="button" title="Start a new conversation">New chat</button>
</header>
<div id="notice" role="alert" hidden></div>
<main>
  <div id="transcript" role="log" aria-live="polite" aria-label="Conversation"></div>
</main>
<form id="composer">
  <label for="prompt" class="visually-hidden">Message</label>
  <textarea id="prompt" rows="1" placeholder="Message" aria-describedby="hint" autofocus></textarea>
  <button id="send" class="primary" type="submit" disabled>Send</button>
  <button id="stop" type="button" disabled>Stop</button>
</form>
<p id="hint">Enter sends, Shift+Enter starts a new line.</p>
<script>
"use strict";
(() => {
  const query = new URLSearchParams(location.search);
  const accessToken = query.get("access_token");
  const params = {};
  for (const [name, parse] of [["max_tokens", parseInt], ["temperature", parseFloat], ["seed", parseInt]]) {
    const value = parse(query.get(name));
    if (Number.isFinite(value)) params[name] = value;
  }

  const $ = (id) => document.getElementById(id);
  const transcript = $("transcript"), promptBox = $("prompt"), sendButton = $("send"), stopButton = $("stop");
  const statusLine = $("status"), modelLine = $("model"), notice = $("notice"), main = document.querySelector("main");

  let socket = null;
  let sessionId = null;          // the server's session on the current connection
  let modelName = "";            // from the server's hello, its first frame
  let sessionPending = false;    // a session.open is unanswered
  let history = [];              // the conversation, kept to restore it in a new session after a reconnect
  let replayHistory = false;     // the next request carries the whole history (the old session is gone)
  let current = null;            // the request streaming now: {id, bubble, textNode, text}
  let nextRequest = 1;
  let reconnectDelay = 500;

  function setStatus(state, text) { statusLine.dataset.state = state; statusLine.textContent = text; }
  function updateButtons() {
    sendButton.disabled = !(sessionId && socket && socket.readyState === WebSocket.OPEN) || current !== null;
    stopButton.disabled = current === null;
  }
  function scrollDown(force) {
    const nearBottom = main.scrollHeight - main.scrollTop - main.clientHeight < 80;
    if (force || nearBottom) main.scrollTop = main.scrollHeight;
  }
  function addMessage(role, text) {
    const bubble = document.createElement("div");
    bubble.className = "msg " + role;
    const body = document.createElement("div");
    body.className = "text";
    body.textContent = text;
    bubble.append(body);
    transcript.append(bubble);
    scrollDown(true);
    return bubble;
  }
  function addMeta(bubble, text, isError) {
    const meta = document.createElement("div");
    meta.className = isError ? "error" : "meta";
    meta.textContent = text;
    bubble.append(meta);
    scrollDown(false);
  }
  function send(message) { socket.send(JSON.stringify(message)); }

  function openSession() {
    sessionId = null;
    sessionPending = true;
    send({ type: "session.open" });
    updateButtons();
  }

  function connect() {
    const url = new URL("/v1/ws", location.href);
    url.protocol = location.protocol === "https:" ? "wss:" : "ws:";
    url.search = accessToken ? "?access_token=" + encodeURIComponent(accessToken) : "";
    setStatus("connecting", "connecting");
    socket = new WebSocket(url);
    socket.onopen = () => { reconnectDelay = 500; openSession(); };
    socket.onmessage = (event) => {
      let message;
      try { message = JSON.parse(event.data); } catch { return; }
      handle(message);
    };
    socket.onclose = (event) => {
      socket = null;
      sessionId = null;
      sessionPending = false;
      if (current) {
        if (current.text) history.push({ role: "assistant", content: current.text });
        finish("connection lost", true);
      }
      if (history.length) replayHistory = true;
      setStatus("offline", event.code === 1001 ? "server going away, reconnecting" : "offline, reconnecting");
      updateButtons();
      setTimeout(connect, reconnectDelay);
      reconnectDelay = Math.min(reconnectDelay * 2, 8000);
    };
  }

  function handle(message) {
    switch (message.type) {
      case "hello":
        modelName = typeof message.model === "string" ? message.model : "";
        break;
      case "session.opened":
        sessionId = message.session_id;
        sessionPending = false;
        setStatus("ready", modelName ? "connected · " + modelName : "connected");
        updateButtons();
        break;
      case "token":
        if (current && message.id === current.id && typeof message.text === "string") {
          current.text += message.text;
          current.textNode.textContent = current.text.replace(/^\s+/, "");  // a reply's leading space
          scrollDown(false);
        }
        break;
      case "done":
        if (current && message.id === current.id) {
          const usage = message.usage || {}, timings = message.timings || {};
          const parts = [(usage.completion_tokens ?? 0) + " tokens"];
          if (timings.tokens_per_second > 0) parts.push(timings.tokens_per_second.toFixed(1) + " tok/s");
          if (timings.first_token_ms > 0) parts.push("first token " + Math.round(timings.first_token_ms) + " ms");
          const reasons = { cancelled: "stopped", length: "length limit", stop: "stop sequence" };
          if (reasons[message.finish_reason]) parts.push(reasons[message.finish_reason]);
          const failed = message.finish_reason === "error" || message.finish_reason === "timeout";
          history.push({ role: "assistant", content: current.text });
          finish(failed ? message.finish_reason + ": " + (message.error_message || "no reason given") : parts.join(" · "), failed);
        }
        break;
      case "error":
        if (current && (message.id === current.id || message.id === "") && !sessionPending) {
          history.pop();  // the turn was refused: the server did not keep it
          replayHistory = current.replay;
          finish(describeError(message), true);
        } else {
          addMessage("system error", describeError(message));
          if (sessionPending) { sessionPending = false; setStatus("offline", "no session"); }
        }
        break;
    }
  }

  function describeError(message) {
    return message.code + (message.field ? " (" + message.field + ")" : "") + ": " + message.message;
  }

  function finish(text, isError) {
    const bubble = current.bubble;
    bubble.dataset.state = isError ? "error" : "done";
    bubble.removeAttribute("aria-busy");
    addMeta(bubble, text, isError);
    current = null;
    updateButtons();
    promptBox.focus();
  }

  function submit() {
    const text = promptBox.value.trim();
    if (!text || sendButton.disabled) return;
    promptBox.value = "";
    resize();
    addMessage("user", text);
    history.push({ role: "user", content: text });
    const id = "r" + nextRequest++;
    const bubble = addMessage("assistant", "");
    bubble.dataset.state = "streaming";
    bubble.setAttribute("aria-busy", "true");
    current = { id, bubble, textNode: bubble.querySelector(".text"), text: "", replay: replayHistory };
    const messages = replayHistory ? history.slice() : [{ role: "user", content: text }];
    replayHistory = false;
    send({ type: "generate", id, session_id: sessionId, messages, params });
    updateButtons();
  }

  function resize() {
    promptBox.style.height = "auto";
    promptBox.style.height = Math.min(promptBox.scrollHeight + 2, 192) + "px";
  }

  $("composer").addEventListener("submit", (event) => { event.preventDefault(); submit(); });
  promptBox.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) { event.preventDefault(); submit(); }
  });
  promptBox.addEventListener("input", resize);
  stopButton.addEventListener("click", () => {
    if (current && socket && socket.readyState === WebSocket.OPEN) send({ type: "cancel", id: current.id });
  });
  $("new-chat").addEventListener("click", () => {
    // The old request's remaining events are ignored: they belong to the old conversation.
    if (current && socket && socket.readyState === WebSocket.OPEN) send({ type: "cancel", id: current.id });
    current = null;
    transcript.replaceChildren();
    history = [];
    replayHistory = false;
    if (socket && socket.readyState === WebSocket.OPEN) openSession();
    promptBox.focus();
  });

  async function showModel() {
    try {
      const response = await fetch("/health", { cache: "no-store" });
      const health = await response.json();
      modelLine.textContent = health.model ? "model: " + health.model : "";
      if (health.demo === true) {
        notice.textContent = "Demo model with random weights: replies are gibberish; run with --model FILE.gguf";
        notice.hidden = false;
      }
      if (health.status !== "ok") {
        if (!health.model) modelLine.textContent = "model " + (health.status || "loading") + "…";
        setTimeout(showModel, 1000);
      }
    } catch {
      modelLine.textContent = "";
      setTimeout(showModel, 3000);
    }
  }

  showModel();
  connect();
})();
</script>
</body>
</html>
)html";

}  // namespace

std::string_view chat_page_html() noexcept { return kChatPage; }

}  // namespace loom::net
