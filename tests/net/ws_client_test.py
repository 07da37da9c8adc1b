#!/usr/bin/python3
"""An independent WebSocket client against a real loom-gateway process.

Starts the gateway binary on a free port with aidreams260K, streams the greedy completion of
"Once upon a time" over /v1/ws with Debian's python3-websockets, checks the token ids against the
reference implementation's greedy continuation (and the text against the llama2.c runner's output),
then stops the gateway with SIGTERM and checks that it exits with 0.

Usage: ws_client_test.py GATEWAY_BINARY SHARED_DIR
"""

import asyncio
import json
import signal
import subprocess
import sys

import gateway_process

try:
    import websockets
    import websockets.client
except ImportError:
    sys.exit("ws_client_test: the Python module 'websockets' is missing: "
             "install Debian's package with 'apt-get install -y python3-websockets' "
             "(and run this script with /usr/bin/python3)")

PROMPT = "Once upon a time"
STREAM_SECONDS = 60
EXIT_SECONDS = 30
TEST_NAME = "ws_client_test"


def fail(message):
    gateway_process.fail(TEST_NAME, message)


def shared_path(shared_dir, relative):
    return gateway_process.shared_path(TEST_NAME, shared_dir, relative)


async def stream_greedy(port):
    """Streams the greedy completion of PROMPT; returns (token events, done event)."""
    uri = f"ws://127.0.0.1:{port}/v1/ws"
    async with websockets.client.connect(uri, max_size=8 << 20) as ws:
        # The server's first frame: its hello, naming the protocol version and the model.
        hello = json.loads(await asyncio.wait_for(ws.recv(), STREAM_SECONDS))
        if hello.get("type") != "hello" or hello.get("protocol_version") != 1 or not hello.get("model"):
            fail("the first frame is not a hello of protocol 1 with a model: " + json.dumps(hello))
        for attempt in range(100):
            await ws.send(json.dumps({"type": "generate", "id": "py-1", "prompt": PROMPT,
                                      "params": {"temperature": 0, "max_tokens": 64}}))
            tokens = []
            while True:
                frame = json.loads(await asyncio.wait_for(ws.recv(), STREAM_SECONDS))
                if frame.get("id") != "py-1":
                    fail("an event for another request: " + json.dumps(frame))
                if frame["type"] == "token":
                    tokens.append(frame)
                elif frame["type"] == "done":
                    return tokens, frame
                elif frame["type"] == "error":
                    if frame.get("code") == "unavailable" and attempt < 99:
                        await asyncio.sleep(0.1)  # still loading the model
                        break
                    fail("the gateway refused the request: " + json.dumps(frame))
                else:
                    fail("unexpected frame: " + json.dumps(frame))
    fail("the gateway stayed unavailable")


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    binary, shared_dir = sys.argv[1], sys.argv[2]
    model = shared_path(shared_dir, "models/aidreams260K.gguf")
    with open(shared_path(shared_dir, "reference/aidreams260K.once.json")) as file:
        reference_ids = json.load(file)["greedy"]
    with open(shared_path(shared_dir, "reference/aidreams260K.llama2c-greedy.txt")) as file:
        reference_text = file.read()
    if not reference_text.startswith(PROMPT):
        fail("the llama2.c reference text does not start with the prompt")
    reference_text = reference_text[len(PROMPT):]

    gateway = gateway_process.Gateway(TEST_NAME, binary, model)
    try:
        port = gateway.wait_ready()
        tokens, done = asyncio.run(stream_greedy(port))
    except BaseException:
        print(gateway.output(), file=sys.stderr)
        gateway.kill()
        raise

    ids = [token["token"] for token in tokens]
    indexes = [token["index"] for token in tokens]
    text = "".join(token["text"] for token in tokens)
    problems = []
    if indexes != list(range(len(tokens))):
        problems.append(f"token indexes are not 0..n-1: {indexes}")
    if ids != reference_ids[:len(ids)] or len(ids) != 64:
        problems.append(f"token ids differ from the reference greedy ids:\n  got      {ids}\n"
                        f"  expected {reference_ids}")
    if not reference_text.startswith(text):
        problems.append(f"text differs from the reference:\n  got      {text!r}\n"
                        f"  expected {reference_text[:len(text) + 20]!r}...")
    if done.get("finish_reason") != "length" or done.get("usage", {}).get("completion_tokens") != 64:
        problems.append("unexpected done event: " + json.dumps(done))

    gateway.process.send_signal(signal.SIGTERM)
    try:
        code = gateway.process.wait(EXIT_SECONDS)
    except subprocess.TimeoutExpired:
        gateway.kill()
        problems.append(f"the gateway did not exit within {EXIT_SECONDS} s of SIGTERM")
        code = 0
    gateway.reader.join(5)
    if code != 0:
        problems.append(f"the gateway exited with {code} after SIGTERM")
    if problems:
        print(gateway.output(), file=sys.stderr)
        fail("\n".join(problems))
    print(f"ws_client_test: ok: {len(tokens)} greedy tokens match the reference; "
          f"text {text[:40]!r}...; exit code 0 after SIGTERM")


if __name__ == "__main__":
    main()
