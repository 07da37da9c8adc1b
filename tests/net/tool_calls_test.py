#!/usr/bin/python3
"""Forced tool calls end to end, in every family's call syntax, checked by an independent validator.

For each real chat template of ../shared/templates that writes tool calls, starts loom-gateway on a
random-weight model with a real 32,000-token vocabulary (its text is gibberish) with --chat-template-file,
and asks with tool_choice "required" (and with a named function) for a call of one of two tools, over a few
seeds, through the WebSocket protocol (token events, then done) and /v1/chat/completions (whole and
streamed). The grammar must make every reply a well-formed call in the family's syntax, and the parser
must give it back: finish_reason tool_calls, a known name, arguments that parse and validate against the
tool's schema with Debian's python3-jsonschema, the streamed pieces adding up to the done event's calls,
and no content beside them.

Usage: tool_calls_test.py GATEWAY_BINARY SHARED_DIR [--seeds N]
"""

import asyncio
import json
import signal
import subprocess
import sys
import urllib.error
import urllib.request

import gateway_process

TEST_NAME = "tool_calls_test"

try:
    import jsonschema
except ImportError:
    sys.exit(f"{TEST_NAME}: the Python module 'jsonschema' is missing: install Debian's package with "
             "'apt-get install -y python3-jsonschema' (scripts/test does), and run this with /usr/bin/python3")
try:
    import websockets.client
except ImportError:
    sys.exit(f"{TEST_NAME}: the Python module 'websockets' is missing: apt-get install -y python3-websockets")

REQUEST_SECONDS = 120
MAX_TOKENS = 200

# The templates whose call syntax loom parses, one per family (the file names in ../shared/templates).
TEMPLATES = [
    "Qwen-Qwen2.5-7B-Instruct",                        # hermes
    "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use",   # hermes
    "meta-llama-Llama-3.1-8B-Instruct",                # llama3 JSON
    "mistralai-Mistral-Nemo-Instruct-2407",            # [TOOL_CALLS][...]
    "Mistral-Small-3.2-24B-Instruct-2506",             # [TOOL_CALLS]name[ARGS]{...}
    "CohereForAI-c4ai-command-r7b-12-2024-tool_use",   # <|START_ACTION|>
    "meetkai-functionary-medium-v3.1",                 # <function=name>
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B",        # DeepSeek's markers, after reasoning
    "ibm-granite-granite-3.3-2B-Instruct",             # <|tool_call|>
    "openai-gpt-oss-120b",                             # harmony channels
]

# Closed schemas with bounded strings, so that random weights finish the call well within max_tokens. The
# requests say reasoning_format "none": a forced call then comes at once, where random weights would
# otherwise reason until max_tokens (the reasoning before a forced call is tested in reply_grammar's tests).
TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "The weather forecast for a city",
        "parameters": {"type": "object", "additionalProperties": False, "required": ["city", "days"],
                       "properties": {"city": {"type": "string", "enum": ["Paris", "Tokyo", "Lima"]},
                                      "days": {"type": "integer", "minimum": 1, "maximum": 7}}}}},
    {"type": "function", "function": {
        "name": "set_alarm", "description": "Sets an alarm",
        "parameters": {"type": "object", "additionalProperties": False, "required": ["hour"],
                       "properties": {"hour": {"type": "integer", "minimum": 0, "maximum": 23},
                                      "label": {"type": "string", "maxLength": 8}}}}},
]
SCHEMAS = {tool["function"]["name"]: tool["function"]["parameters"] for tool in TOOLS}
MESSAGES = [{"role": "user", "content": "What will the weather be in Paris?"}]


def fail(message):
    gateway_process.fail(TEST_NAME, message)


def post(port, body):
    request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=REQUEST_SECONDS) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def stray(content):
    """Content beside a forced call: none, but for the reasoning block a prompt opened, closed at once (with
    reasoning_format none the close marker is content, as the model wrote it)."""
    return content.replace("</think>", "").strip()


def check_calls(where, calls, only, problems):
    """calls: [(name, arguments text)]."""
    if len(calls) != 1:
        problems.append(f"{where}: {len(calls)} calls: {calls}")
        return
    name, arguments = calls[0]
    if name not in SCHEMAS or (only and name != only):
        problems.append(f"{where}: called {name!r}")
        return
    try:
        jsonschema.validate(json.loads(arguments), SCHEMAS[name])
    except (ValueError, jsonschema.ValidationError) as error:
        problems.append(f"{where}: arguments {arguments!r}: {str(error).splitlines()[0]}")


async def websocket_call(port, seed, only):
    request = {"type": "generate", "id": "t", "messages": MESSAGES, "tools": TOOLS, "parallel_tool_calls": False,
               "reasoning_format": "none",
               "tool_choice": {"type": "function", "function": {"name": only}} if only else "required",
               "params": {"max_tokens": MAX_TOKENS, "seed": seed, "temperature": 1.0}}
    async with websockets.client.connect(f"ws://127.0.0.1:{port}/v1/ws", max_size=8 << 20) as ws:
        hello = json.loads(await asyncio.wait_for(ws.recv(), REQUEST_SECONDS))  # the server's first frame
        if hello["type"] != "hello":
            fail("websocket: the first frame is not a hello: " + json.dumps(hello))
        await ws.send(json.dumps(request))
        content, streamed = "", []
        while True:
            frame = json.loads(await asyncio.wait_for(ws.recv(), REQUEST_SECONDS))
            if frame["type"] == "token":
                content += frame["text"]
                for delta in frame.get("tool_calls", []):
                    if delta["index"] == len(streamed):
                        streamed.append([delta.get("name"), ""])
                    streamed[delta["index"]][1] += delta["arguments"]
            elif frame["type"] == "done":
                done = [(c["name"], c["arguments"]) for c in frame.get("tool_calls", [])]
                return content, [tuple(s) for s in streamed], done, frame["finish_reason"]
            else:
                fail("websocket: " + json.dumps(frame))


def http_call(port, seed, stream):
    body = {"messages": MESSAGES, "tools": TOOLS, "tool_choice": "required", "parallel_tool_calls": False,
            "reasoning_format": "none",
            "max_tokens": MAX_TOKENS, "seed": seed, "temperature": 1.0, "stream": stream}
    status, text = post(port, body)
    if status != 200:
        fail(f"status {status}: {text[:500]}")
    if not stream:
        choice = json.loads(text)["choices"][0]
        message = choice["message"]
        calls = [(c["function"]["name"], c["function"]["arguments"]) for c in message.get("tool_calls", [])]
        return message.get("content") or "", calls, choice["finish_reason"]
    content, calls, reason = "", [], None
    for line in text.splitlines():
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        choice = json.loads(line[len("data: "):])["choices"][0]
        delta = choice.get("delta", {})
        content += delta.get("content") or ""
        for piece in delta.get("tool_calls", []):
            if piece["index"] == len(calls):
                calls.append([piece["function"]["name"], ""])
            calls[piece["index"]][1] += piece["function"].get("arguments", "")
        reason = choice.get("finish_reason") or reason
    return content, [tuple(c) for c in calls], reason


def run_template(binary, model, template, seeds, problems):
    gateway = gateway_process.Gateway(TEST_NAME, binary, model, ["--kv-cache-mb", "64", "--chat-template-file", template])
    checked = 0
    try:
        port = gateway.wait_ready()
        name = template.rsplit("/", 1)[-1]
        for seed in range(seeds):
            only = "set_alarm" if seed % 2 else None
            content, streamed, done, reason = asyncio.run(websocket_call(port, seed, only))
            where = f"{name} websocket seed {seed}"
            if reason != "tool_calls" or stray(content):
                problems.append(f"{where}: finish_reason {reason}, content {content!r}, calls {done}")
                continue
            if streamed != done:
                problems.append(f"{where}: streamed {streamed} but done has {done}")
            check_calls(where, done, only, problems)
            checked += 1
            for stream in (False, True):
                content, calls, reason = http_call(port, 100 + seed, stream)
                where = f"{name} http seed {seed} {'streamed' if stream else 'whole'}"
                if reason != "tool_calls" or stray(content):
                    problems.append(f"{where}: finish_reason {reason}, content {content!r}, calls {calls}")
                    continue
                check_calls(where, calls, None, problems)
                checked += 1
    except BaseException:
        print(gateway.output(), file=sys.stderr)
        gateway.kill()
        raise
    gateway.process.send_signal(signal.SIGTERM)
    try:
        if gateway.process.wait(30) != 0:
            problems.append(f"{template}: the gateway exited with {gateway.process.returncode}")
    except subprocess.TimeoutExpired:
        gateway.kill()
        problems.append(f"{template}: the gateway did not exit within 30 s of SIGTERM")
    if problems:
        print(gateway.output(), file=sys.stderr)
    return checked


def main():
    args = sys.argv[1:]
    seeds = 2
    if "--seeds" in args:
        seeds = int(args[args.index("--seeds") + 1])
        del args[args.index("--seeds"):args.index("--seeds") + 2]
    if len(args) != 2:
        sys.exit(__doc__)
    binary, shared_dir = args
    model = gateway_process.shared_path(TEST_NAME, shared_dir, "models/synth11M-q8_0.gguf")
    problems, checked = [], 0
    for name in TEMPLATES:
        template = gateway_process.shared_path(TEST_NAME, shared_dir, f"templates/templates/{name}.jinja")
        checked += run_template(binary, model, template, seeds, problems)
    if problems:
        fail(f"{len(problems)} problems:\n  " + "\n  ".join(problems))
    print(f"{TEST_NAME}: {checked} forced calls well formed and valid, {len(TEMPLATES)} templates x {seeds} seeds "
          f"x (WebSocket, HTTP whole, HTTP streamed)")


if __name__ == "__main__":
    main()
