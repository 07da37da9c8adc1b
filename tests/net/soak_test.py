#!/usr/bin/python3
"""Soak: many clients doing everything a real population does, against one loom-gateway, for a while.

Starts loom-gateway on loopback with aidreams260K, records a greedy completion and the idle state (engine
bookkeeping, KV blocks, open file descriptors, resident memory), then runs CLIENTS clients at once for the
given time. Each client loops over randomly chosen behaviours on both transports:

  WebSocket: generate and read to the end; cancel after a few tokens; disconnect mid-stream (abort, no
  close frame); malformed frames (not JSON, binary, NUL and garbage after the object, bad fields) and then
  a good request on the same connection; a slow reader (small receive queue, sleeps between reads);
  a multi-turn conversation (session.open, then turns naming it).
  HTTP: streamed and non-streamed completions and chat completions read to the end; disconnect
  mid-stream or before a non-streamed answer; malformed bodies.

Checked during the run: every request that was read to its end got exactly one terminal event (WebSocket:
one `done` or one `error`, token indexes 0..n-1, nothing after the end; SSE: one chunk with a
finish_reason, or one error event, then [DONE]; non-streamed: one JSON answer or one error status), and no
response is a 500. Checked after the run, once the gateway is idle again (bounded wait): the process is
alive; no request is active, running or waiting; no KV block is in use (each is free or cached); every
`loom_engine_bookkeeping_entries` series is back to its idle value; the open file descriptors are back to
their idle count; resident memory grew by less than RSS_GROWTH_BOUND; and a fresh greedy request gives
the same tokens as before the soak.

Usage: soak_test.py GATEWAY_BINARY SHARED_DIR [--seconds S | --minutes M] [--clients N] [--seed N]
CI runs the 60-second mode (ctest label soak); by hand: --minutes 30.
"""

import argparse
import asyncio
import json
import random
import signal
import subprocess
import sys
import time

import gateway_process

try:
    import websockets
    import websockets.client
    import websockets.exceptions
except ImportError:
    sys.exit("soak_test: the Python module 'websockets' is missing: install Debian's package with "
             "'apt-get install -y python3-websockets' (and run this script with /usr/bin/python3)")

TEST_NAME = "soak_test"
PROMPTS = ["Once upon a time", "The little dog", "Lily and Ben went to the park", "One day, a bird",
           "Tom had a red ball"]
GREEDY = {"temperature": 0, "max_tokens": 48}
# Memory the gateway may keep after the soak: allocator arenas of the I/O and compute threads, the prefix
# cache's bookkeeping, the metrics histograms. A leak of a few hundred bytes per request over a 60-second
# soak (tens of thousands of requests) stays under it, so the engine's map sizes are what catch those;
# this bound catches the large ones (a buffer or a connection kept per request).
RSS_GROWTH_BOUND = 48 << 20
SETTLE_SECONDS = 30
REQUEST_SECONDS = 60  # the longest one request of the soak may take to end, under full load


def fail(message):
    gateway_process.fail(TEST_NAME, message)


class Tally:
    """What the clients saw; `problems` fails the test."""

    def __init__(self):
        self.counts = {}
        self.problems = []

    def count(self, what):
        self.counts[what] = self.counts.get(what, 0) + 1

    def problem(self, what):
        if len(self.problems) < 50:
            self.problems.append(what)


# ---------------------------------------------------------------- WebSocket behaviours

async def ws_read_request(ws, request_id, tally, stop_after=None):
    """Reads one request's events to its end; checks indexes and exactly one terminal event.
    With stop_after, returns after that many tokens (the caller cancels or disconnects)."""
    next_index = 0
    while True:
        frame = json.loads(await asyncio.wait_for(ws.recv(), REQUEST_SECONDS))
        if frame.get("id") != request_id:
            tally.problem(f"ws: an event for another request: {frame}")
            continue
        kind = frame.get("type")
        if kind == "token":
            if frame.get("index") != next_index:
                tally.problem(f"ws: token index {frame.get('index')}, expected {next_index}")
            next_index += 1
            if stop_after is not None and next_index >= stop_after:
                return "partial", next_index
        elif kind == "done":
            tally.count("ws_done_" + frame.get("finish_reason", "?"))
            return "done", frame
        elif kind == "error":
            if next_index:
                tally.problem(f"ws: an error event after tokens: {frame}")
            if frame.get("code") == "internal":
                tally.problem(f"ws: internal error: {frame}")
            tally.count("ws_error_" + frame.get("code", "?"))
            return "error", frame
        else:
            tally.problem(f"ws: unexpected frame {frame}")


async def ws_expect_nothing_more(ws, request_id, tally):
    """After a request's end, nothing more about it may come (checked for a short while)."""
    try:
        frame = json.loads(await asyncio.wait_for(ws.recv(), 0.05))
        tally.problem(f"ws: an event after the end of {request_id}: {frame}")
    except asyncio.TimeoutError:
        pass


def generate(request_id, rng, **fields):
    params = {"temperature": rng.choice([0, 0.7, 1.0]), "max_tokens": rng.randint(1, 40)}
    return json.dumps({"type": "generate", "id": request_id, "prompt": rng.choice(PROMPTS),
                       "params": params, **fields})


class ws_connect:
    """Awaited: the connection, its first frame (the server's hello) read and checked; in `async with`: the
    same, closed at the end of the block."""

    def __init__(self, port, **options):
        self._connect = websockets.client.connect(f"ws://127.0.0.1:{port}/v1/ws", max_size=8 << 20,
                                                  ping_interval=None, **options)
        self._ws = None

    async def _open(self):
        ws = await self._connect
        hello = json.loads(await asyncio.wait_for(ws.recv(), REQUEST_SECONDS))
        if hello.get("type") != "hello" or hello.get("protocol_version") != 1:
            raise AssertionError(f"ws: the first frame is not a hello of protocol 1: {hello}")
        return ws

    def __await__(self):
        return self._open().__await__()

    async def __aenter__(self):
        self._ws = await self._open()
        return self._ws

    async def __aexit__(self, *exc):
        await self._ws.close()


async def ws_generate(port, rng, tally, serial):
    async with ws_connect(port) as ws:
        for turn in range(rng.randint(1, 3)):
            request_id = f"g{serial}-{turn}"
            await ws.send(generate(request_id, rng))
            await ws_read_request(ws, request_id, tally)
        await ws_expect_nothing_more(ws, request_id, tally)


async def ws_cancel(port, rng, tally, serial):
    async with ws_connect(port) as ws:
        request_id = f"c{serial}"
        await ws.send(json.dumps({"type": "generate", "id": request_id, "prompt": rng.choice(PROMPTS),
                                  "params": {"max_tokens": 200, "ignore_eos": True}}))
        outcome, _ = await ws_read_request(ws, request_id, tally, stop_after=rng.randint(1, 5))
        if outcome == "partial":
            await ws.send(json.dumps({"type": "cancel", "id": request_id}))
            # A few tokens may still come, then exactly one done (indexes are not rechecked here).
            outcome, frame = await ws_read_rest(ws, request_id, tally)
            if outcome != "done":
                tally.problem(f"ws: a cancelled request ended with {frame}")
        await ws_expect_nothing_more(ws, request_id, tally)


async def ws_disconnect(port, rng, tally, serial):
    ws = await ws_connect(port)
    request_id = f"d{serial}"
    await ws.send(json.dumps({"type": "generate", "id": request_id, "prompt": rng.choice(PROMPTS),
                              "params": {"max_tokens": 300, "ignore_eos": True}}))
    await ws_read_request(ws, request_id, tally, stop_after=rng.randint(1, 8))
    ws.transport.abort()  # no close frame: the TCP connection just goes
    tally.count("ws_aborted")


MALFORMED_FRAMES = [
    "not json",
    '{"type":"generate","id":"m","prompt":"x"}\u0000garbage',
    '{"type":"generate","id":"m","prompt":"x","params":{"top_p":7}}',
    '{"type":"generate","id":"m"}',
    '{"type":"warp","id":"m"}',
    '[1,2,3]',
    '{"type":"generate","id":"m","prompt":"x","params":{"max_tokens":100000000}}',
    '{"type":"cancel"}',
    '{' * 200,
    '{"type":"generate","id":"' + "x" * 300 + '","prompt":"x"}',
]


async def ws_malformed(port, rng, tally, serial):
    async with ws_connect(port) as ws:
        for frame in rng.sample(MALFORMED_FRAMES, 3):
            await ws.send(frame)
            reply = json.loads(await asyncio.wait_for(ws.recv(), REQUEST_SECONDS))
            if reply.get("type") != "error" or reply.get("code") != "invalid_request":
                tally.problem(f"ws: malformed frame {frame[:60]!r} answered {reply}")
            tally.count("ws_refused_malformed")
        await ws.send(b"\x00\x01binary")
        reply = json.loads(await asyncio.wait_for(ws.recv(), REQUEST_SECONDS))
        if reply.get("code") != "invalid_request":
            tally.problem(f"ws: a binary frame answered {reply}")
        request_id = f"m{serial}"  # the connection still serves
        await ws.send(generate(request_id, rng))
        await ws_read_request(ws, request_id, tally)


async def ws_read_rest(ws, request_id, tally, pause=None, rng=None):
    """Reads the rest of a request whose first tokens were read: tokens, then exactly one done."""
    while True:
        if pause:
            await asyncio.sleep(rng.uniform(*pause))
        frame = json.loads(await asyncio.wait_for(ws.recv(), REQUEST_SECONDS))
        if frame.get("id") != request_id or frame.get("type") not in ("token", "done"):
            tally.problem(f"ws: after the first tokens of {request_id}: {frame}")
            return "error", frame
        if frame["type"] == "done":
            tally.count("ws_done_" + frame.get("finish_reason", "?"))
            return "done", frame


async def ws_slow_reader(port, rng, tally, serial):
    # A two-message receive queue: once it is full the library stops reading the socket, so the gateway's
    # frames back up in TCP and then in its own send queue.
    async with ws_connect(port, max_queue=2, read_limit=1024) as ws:
        request_id = f"s{serial}"
        await ws.send(json.dumps({"type": "generate", "id": request_id, "prompt": rng.choice(PROMPTS),
                                  "params": {"max_tokens": 64, "ignore_eos": True}}))
        outcome, _ = await ws_read_request(ws, request_id, tally, stop_after=1)
        if outcome == "partial":
            await ws_read_rest(ws, request_id, tally, pause=(0.005, 0.05), rng=rng)


async def ws_multi_turn(port, rng, tally, serial):
    async with ws_connect(port) as ws:
        session = f"conv{serial}"
        await ws.send(json.dumps({"type": "session.open", "session_id": session,
                                  "system_prompt": "You tell short stories."}))
        opened = json.loads(await asyncio.wait_for(ws.recv(), REQUEST_SECONDS))
        if opened.get("type") != "session.opened":
            if opened.get("type") == "error" and opened.get("code") in ("overloaded", "unavailable"):
                tally.count("ws_session_refused")
                return
            tally.problem(f"ws: session.open answered {opened}")
            return
        for turn in range(rng.randint(2, 4)):
            request_id = f"t{serial}-{turn}"
            await ws.send(json.dumps({"type": "generate", "id": request_id, "session_id": session,
                                      "messages": [{"role": "user", "content": rng.choice(PROMPTS)}],
                                      "params": {"temperature": 0.5, "max_tokens": rng.randint(4, 24)}}))
            await ws_read_request(ws, request_id, tally)
        tally.count("ws_conversation")


# ---------------------------------------------------------------- HTTP behaviours

async def http_send(port, path, body):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    payload = body if isinstance(body, bytes) else json.dumps(body).encode()
    writer.write((f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
                  f"Content-Length: {len(payload)}\r\nConnection: close\r\n\r\n").encode() + payload)
    await writer.drain()
    return reader, writer


async def http_read_head(reader):
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), REQUEST_SECONDS)
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            name, value = line.split(":", 1)
            headers[name.strip().lower()] = value.strip()
    return status, headers


async def http_read_body(reader, headers):
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = b""
        while True:
            size = int((await asyncio.wait_for(reader.readuntil(b"\r\n"), REQUEST_SECONDS)).strip(), 16)
            chunk = await asyncio.wait_for(reader.readexactly(size + 2), REQUEST_SECONDS)
            body += chunk[:-2]
            if size == 0:
                return body
    if "content-length" in headers:
        return await asyncio.wait_for(reader.readexactly(int(headers["content-length"])), REQUEST_SECONDS)
    return await asyncio.wait_for(reader.read(), REQUEST_SECONDS)


def http_body(rng, chat, stream):
    body = {"model": "loom", "max_tokens": rng.randint(1, 32), "temperature": rng.choice([0, 0.8]),
            "stream": stream}
    if chat:
        body["messages"] = [{"role": "user", "content": rng.choice(PROMPTS)}]
    else:
        body["prompt"] = rng.choice(PROMPTS)
    return body


def check_sse(body, tally):
    events = [line[len("data: "):] for line in body.decode().split("\n") if line.startswith("data: ")]
    if not events or events[-1] != "[DONE]":
        tally.problem(f"http: a stream that does not end with [DONE]: {events[-3:]}")
        return
    finishes = errors = 0
    for event in events[:-1]:
        chunk = json.loads(event)
        if "error" in chunk:
            errors += 1
            continue
        finishes += sum(1 for choice in chunk.get("choices", []) if choice.get("finish_reason"))
    if finishes + errors != 1:
        tally.problem(f"http: a stream with {finishes} finish_reason chunks and {errors} errors")
    tally.count("http_stream_error" if errors else "http_stream_done")


async def http_complete(port, rng, tally, serial):
    chat, stream = rng.random() < 0.5, rng.random() < 0.5
    body = http_body(rng, chat, stream)
    reader, writer = await http_send(port, "/v1/chat/completions" if chat else "/v1/completions", body)
    stage = "the response's head"
    try:
        status, headers = await http_read_head(reader)
        stage = f"the body of a {status} response with headers {headers}"
        body = await http_read_body(reader, headers)
    except asyncio.TimeoutError:
        tally.problem(f"http: no {stage} within {REQUEST_SECONDS} s for {json.dumps(body)}")
        return
    finally:
        writer.close()
    if status >= 500 and status != 503:
        tally.problem(f"http: status {status}: {body[:200]!r}")
    elif status == 503:
        tally.count("http_503")
        if "retry-after" not in headers:
            tally.problem("http: a 503 without Retry-After")
    elif status != 200:
        tally.problem(f"http: status {status} for a good request: {body[:200]!r}")
    elif stream:
        check_sse(body, tally)
    else:
        answer = json.loads(body)
        if not answer.get("choices") or not answer["choices"][0].get("finish_reason"):
            tally.problem(f"http: a non-streamed answer without finish_reason: {answer}")
        tally.count("http_json_done")


async def http_disconnect(port, rng, tally, serial):
    body = http_body(rng, rng.random() < 0.5, rng.random() < 0.5)
    body["max_tokens"] = 300
    reader, writer = await http_send(port, "/v1/completions" if "prompt" in body else "/v1/chat/completions",
                                     body)
    if body["stream"]:
        await asyncio.wait_for(reader.read(200), REQUEST_SECONDS)
    else:
        await asyncio.sleep(rng.uniform(0.0, 0.2))
    writer.transport.abort()
    tally.count("http_aborted")


MALFORMED_BODIES = [b"{", b"[]", b'{"prompt": 5}', b'{"prompt":"x","max_tokens":-1}',
                    b'{"prompt":"x"}\x00garbage', b'{"messages":[{"role":"wizard","content":"x"}]}']


async def http_malformed(port, rng, tally, serial):
    body = rng.choice(MALFORMED_BODIES)
    reader, writer = await http_send(port, rng.choice(["/v1/completions", "/v1/chat/completions"]), body)
    try:
        status, headers = await http_read_head(reader)
        await http_read_body(reader, headers)
    finally:
        writer.close()
    if status != 400:
        tally.problem(f"http: malformed body {body!r} answered {status}")
    tally.count("http_refused_malformed")


BEHAVIOURS = [(ws_generate, 4), (ws_cancel, 2), (ws_disconnect, 2), (ws_malformed, 1), (ws_slow_reader, 1),
              (ws_multi_turn, 2), (http_complete, 4), (http_disconnect, 2), (http_malformed, 1)]


async def client(port, rng, tally, deadline, serials):
    functions, weights = zip(*BEHAVIOURS)
    while time.monotonic() < deadline:
        behaviour = rng.choices(functions, weights)[0]
        serial = next(serials)
        try:
            await behaviour(port, rng, tally, serial)
        except (asyncio.TimeoutError, asyncio.IncompleteReadError) as error:
            tally.problem(f"{behaviour.__name__}: no answer in time ({type(error).__name__})")
        except (ConnectionError, websockets.exceptions.WebSocketException, OSError) as error:
            tally.problem(f"{behaviour.__name__}: the connection failed: {error!r}")
        tally.count(behaviour.__name__)


# ---------------------------------------------------------------- Before and after

async def greedy_tokens(port):
    async with ws_connect(port) as ws:
        for _ in range(600):
            await ws.send(json.dumps({"type": "generate", "id": "greedy", "prompt": PROMPTS[0],
                                      "params": GREEDY}))
            tokens = []
            while True:
                frame = json.loads(await asyncio.wait_for(ws.recv(), REQUEST_SECONDS))
                if frame["type"] == "token":
                    tokens.append(frame["token"])
                elif frame["type"] == "done":
                    return tokens
                elif frame.get("code") == "unavailable":
                    await asyncio.sleep(0.1)  # the model is still loading
                    break
                else:
                    fail(f"the greedy request got {frame}")
    fail("the gateway stayed unavailable")


def idle_state(gateway):
    """What must come back after the soak: bookkeeping sizes, requests, KV blocks in use."""
    metrics = gateway.metrics()
    bookkeeping = {labels: value for (name, labels), value in metrics.items()
                   if name == "engine_bookkeeping_entries"}
    if not bookkeeping:
        fail("the gateway's /metrics has no loom_engine_bookkeeping_entries series")
    busy = {name: metrics.get((name, labels), -1) for name, labels in
            [("engine_active_requests", ""), ("sequences_running", ""), ("sequences_waiting", ""),
             ("kv_blocks", '{state="used"}'), ("gateway_requests_in_flight", "")]}
    return bookkeeping, busy


def settle(gateway, idle_bookkeeping, idle_fds):
    """Waits (bounded) for the gateway to be idle again; returns what still differs."""
    deadline = time.monotonic() + SETTLE_SECONDS
    while True:
        bookkeeping, busy = idle_state(gateway)
        differences = [f"{name} = {value}, expected 0" for name, value in busy.items() if value != 0]
        differences += [f"loom_engine_bookkeeping_entries{labels} = {value}, idle {idle_bookkeeping.get(labels)}"
                        for labels, value in bookkeeping.items() if value != idle_bookkeeping.get(labels)]
        fds = gateway.open_fds()
        if fds > idle_fds:
            differences.append(f"{fds} open file descriptors, {idle_fds} when idle")
        if not differences or time.monotonic() > deadline:
            return differences
        time.sleep(0.25)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("gateway")
    parser.add_argument("shared_dir")
    length = parser.add_mutually_exclusive_group()
    length.add_argument("--seconds", type=float, default=60)
    length.add_argument("--minutes", type=float)
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--seed", type=int, default=int(time.time()))
    args = parser.parse_args()
    seconds = args.minutes * 60 if args.minutes is not None else args.seconds
    model = gateway_process.shared_path(TEST_NAME, args.shared_dir, "models/aidreams260K.gguf")
    print(f"soak_test: {args.clients} clients for {seconds:.0f} s, seed {args.seed}", flush=True)

    gateway = gateway_process.Gateway(TEST_NAME, args.gateway, model, ["--log-level", "warn"])
    try:
        port = gateway.wait_ready()
        before = asyncio.run(greedy_tokens(port))
        idle_bookkeeping, _ = idle_state(gateway)
        idle_fds, idle_rss = gateway.open_fds(), gateway.rss_bytes()
        tally = asyncio.run(soak(port, args, seconds))
        if gateway.process.poll() is not None:
            fail(f"the gateway ended during the soak (exit {gateway.process.returncode}):\n" + gateway.output())
        differences = settle(gateway, idle_bookkeeping, idle_fds)
        growth = gateway.rss_bytes() - idle_rss
        after = asyncio.run(greedy_tokens(port))
    except BaseException:
        print(gateway.output(), file=sys.stderr)
        gateway.kill()
        raise

    problems = tally.problems + differences
    if growth > RSS_GROWTH_BOUND:
        problems.append(f"resident memory grew by {growth >> 20} MiB (bound {RSS_GROWTH_BOUND >> 20} MiB)")
    if after != before:
        problems.append(f"the greedy tokens changed:\n  before {before}\n  after  {after}")
    gateway.process.send_signal(signal.SIGTERM)
    try:
        if gateway.process.wait(30) != 0:
            problems.append(f"the gateway exited with {gateway.process.returncode} after SIGTERM")
    except subprocess.TimeoutExpired:
        gateway.kill()
        problems.append("the gateway did not exit within 30 s of SIGTERM")
    summary = ", ".join(f"{name} {count}" for name, count in sorted(tally.counts.items()))
    print(f"soak_test: {summary}; RSS growth {growth / (1 << 20):.1f} MiB", flush=True)
    if problems:
        print(gateway.output(), file=sys.stderr)
        fail(f"{len(problems)} problems (seed {args.seed}):\n  " + "\n  ".join(problems))
    print("soak_test: ok")


async def soak(port, args, seconds):
    tally = Tally()
    serials = iter(range(1 << 62))
    deadline = time.monotonic() + seconds
    rngs = [random.Random(args.seed * 1000 + index) for index in range(args.clients)]
    await asyncio.gather(*(client(port, rng, tally, deadline, serials) for rng in rngs))
    return tally


if __name__ == "__main__":
    main()
