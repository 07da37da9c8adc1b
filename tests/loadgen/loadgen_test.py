#!/usr/bin/python3
"""loom-loadgen end to end, one case per run (each its own ctest entry, label loadgen_tests).

Cases against a real loom-gateway on aidreams260K (started on a free port, tests/net/gateway_process.py):
  http         24 requests, 4 streams, both OpenAI routes: the counts, the token totals, the percentiles
  websocket    the same over loom's WebSocket protocol
  repeatable   the same --seed gives the same lengths, another seed other ones
  api_key      a wrong API key: every request an http_status error with 401 (HTTP and WebSocket)
  progress     a --duration run: a progress line on stderr with --progress, none without; Ctrl-C ends a
               long run with a report of what finished (exit status 130)
Cases without a model:
  unreachable  a port with nothing listening: connect errors, exit status 1, a clear message
  usage        bad arguments: exit status 2 and a message naming the option
  fake_servers small OpenAI-shaped servers in this script: no usage chunk (tokens counted from chunks),
               tokens timed as they arrive (a paced stream), a body held open after [DONE], keep-alive
               reuse, silent HTTP and WebSocket servers (timeouts), answers that break the protocol, an
               error event in the stream, a line over the size limit, more chunks than asked (bounded)

Usage: loadgen_test.py CASE LOADGEN_BINARY GATEWAY_BINARY SHARED_DIR
"""

import http.server
import json
import os
import re
import signal
import socket
import socketserver
import subprocess
import sys
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "net"))
import gateway_process  # noqa: E402

TEST_NAME = "loadgen_test"
RUN_SECONDS = 90


def fail(message):
    gateway_process.fail(TEST_NAME, message)


def check(condition, message):
    if not condition:
        fail(message)


class Context:
    def __init__(self, loadgen, gateway, shared_dir):
        self.loadgen = loadgen
        self.gateway = gateway
        self.shared_dir = shared_dir

    def model(self):
        return gateway_process.shared_path(TEST_NAME, self.shared_dir, "models/aidreams260K.gguf")

    def run(self, *args, expect_status=None):
        """Runs loom-loadgen; returns (exit status, the --json report or None, stderr)."""
        env = {k: v for k, v in os.environ.items() if k != "LOOM_API_KEY"}
        result = subprocess.run([self.loadgen, *args], capture_output=True, text=True, timeout=RUN_SECONDS, env=env)
        report = None
        if "--json" in args and result.stdout.strip():
            try:
                report = json.loads(result.stdout)
            except json.JSONDecodeError:
                fail(f"--json printed something that is not JSON:\n{result.stdout}\nstderr:\n{result.stderr}")
        if expect_status is not None and result.returncode != expect_status:
            fail(f"loom-loadgen {' '.join(args)} exited with {result.returncode}, expected {expect_status}\n"
                 f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}")
        return result.returncode, report, result.stderr


def start_gateway(context, *extra):
    os.environ.pop("LOOM_API_KEY", None)
    gateway = gateway_process.Gateway(TEST_NAME, context.gateway, context.model(), extra)
    return gateway, gateway.wait_ready()


def check_ordered(report, name):
    stats = report[name]
    check(stats["p50"] is not None, f"{name}: no percentiles: {stats}")
    check(stats["min"] <= stats["p50"] <= stats["p90"] <= stats["p99"] <= stats["max"],
          f"{name}: percentiles out of order: {stats}")
    check(stats["min"] >= 0, f"{name}: a negative latency: {stats}")
    quantiles = stats["quantiles"]
    check(len(quantiles) == 101 and quantiles == sorted(quantiles), f"{name}: 101 ordered quantiles expected: {stats}")
    check(quantiles[50] == stats["p50"] and quantiles[90] == stats["p90"] and quantiles[99] == stats["p99"],
          f"{name}: quantiles disagree with the percentiles: {stats}")
    check(quantiles[0] == stats["min"] and quantiles[100] == stats["max"], f"{name}: quantiles' ends: {stats}")


def check_complete_run(report, requests, exact_gaps):
    """What every successful run against loom-gateway must report."""
    text = json.dumps(report, indent=1)
    check(report["requests"] == requests and report["completed"] == requests and report["failed"] == 0,
          f"expected {requests} completed requests and no failure:\n{text}")
    check(all(count == 0 for count in report["errors"].values()), f"errors reported:\n{text}")
    # ignore_eos is sent and loom honours it: every request generates exactly its max_tokens.
    check(report["output_tokens"] == report["asked_output_tokens"] > 0,
          f"output tokens differ from the max_tokens asked:\n{text}")
    check(report["token_count_source"] == "usage", f"loom gives usage counts:\n{text}")
    check(report["output_tokens_per_s"] > 0 and report["requests_per_s"] > 0, f"no throughput:\n{text}")
    check(report["ttft_ms"]["count"] == requests and report["e2e_ms"]["count"] == requests,
          f"one TTFT and one end-to-end latency per request:\n{text}")
    # Each request of n tokens has n - 1 gaps between its tokens. Over HTTP a token whose text is empty (a
    # leading space dropped, half of a character) sends a chunk of empty text, which is no content event.
    gaps, most = report["itl_ms"]["count"], report["output_tokens"] - requests
    if exact_gaps:
        check(gaps == most, f"inter-token gaps miscounted:\n{text}")
    else:
        check(0.9 * most <= gaps <= most, f"inter-token gaps miscounted:\n{text}")
    for name in ("ttft_ms", "itl_ms", "e2e_ms", "tpot_ms"):
        check_ordered(report, name)
    check(report["ttft_ms"]["max"] <= report["e2e_ms"]["max"], f"a first token after the end:\n{text}")
    # Prompts are text: calibrated to the server's tokenizer, their lengths come out close to the asked ones.
    check(report["prompt_length"]["calibrated"], f"the calibration probes failed:\n{text}")
    asked, got = report["asked_prompt_tokens"], report["prompt_tokens"]
    check(got is not None and abs(got - asked) <= 0.15 * asked,
          f"prompt tokens {got} are not within 15 % of the {asked} asked:\n{text}")


LOAD = ["--requests", "24", "--concurrency", "4", "--prompt-tokens", "48:64", "--max-tokens", "8:32", "--json"]


def case_http(context):
    gateway, port = start_gateway(context)
    try:
        _, report, _ = context.run("--url", f"http://127.0.0.1:{port}/v1", "--endpoint", "both", *LOAD,
                                   expect_status=0)
        check_complete_run(report, 24, exact_gaps=False)
        check(report["protocol"] == "openai_http" and report["endpoint"] == "both", json.dumps(report))
    finally:
        gateway.kill()


def case_websocket(context):
    gateway, port = start_gateway(context)
    try:
        _, report, _ = context.run("--url", f"ws://127.0.0.1:{port}", *LOAD, expect_status=0)
        check_complete_run(report, 24, exact_gaps=True)  # every token event is one token
        check(report["protocol"] == "loom_websocket" and report["url"].endswith("/v1/ws"), json.dumps(report))
        _, chat, _ = context.run("--url", f"ws://127.0.0.1:{port}", "--endpoint", "chat", "--requests", "4",
                                 "--prompt-tokens", "10", "--max-tokens", "8", "--json", expect_status=0)
        check(chat["completed"] == 4 and chat["output_tokens"] == 32, json.dumps(chat))
    finally:
        gateway.kill()


def reused_prompt_tokens(gateway):
    return gateway.metrics().get(("prompt_tokens_reused_total", ""), 0)


def case_shared_prefix(context):
    """--shared-prefix-tokens: loom's prefix cache serves the common beginning; without it nothing is reused."""
    gateway, port = start_gateway(context)
    try:
        load = ["--url", f"http://127.0.0.1:{port}", "--requests", "4", "--prompt-tokens", "100",
                "--max-tokens", "4", "--json"]
        before = reused_prompt_tokens(gateway)
        _, plain, _ = context.run(*load, expect_status=0)
        plain_reused = reused_prompt_tokens(gateway) - before
        _, shared, _ = context.run(*load, "--shared-prefix-tokens", "64", "--seed", "2", expect_status=0)
        shared_reused = reused_prompt_tokens(gateway) - before - plain_reused
        check(plain["shared_prefix_tokens"] == 0 and shared["shared_prefix_tokens"] == 64, json.dumps(shared))
        check(plain_reused <= 16, f"random prompts reused {plain_reused} tokens of the prefix cache")
        # Requests 2 to 4 find at least two full blocks (32 tokens) of the 64-token prefix cached.
        check(shared_reused >= 3 * 32, f"a shared 64-token prefix reused only {shared_reused} tokens in 4 requests")
    finally:
        gateway.kill()


def case_repeatable(context):
    gateway, port = start_gateway(context)
    try:
        url = f"http://127.0.0.1:{port}"
        runs = [context.run("--url", url, *LOAD, "--seed", seed, expect_status=0)[1] for seed in ("5", "5", "6")]
        keys = ("asked_output_tokens", "asked_prompt_tokens", "output_tokens", "prompt_tokens")
        first, again, other = ([run[key] for key in keys] for run in runs)
        check(first == again, f"the same seed gave other lengths: {first} then {again}")
        check(first[:2] != other[:2], f"another seed gave the same lengths: {first} and {other}")
    finally:
        gateway.kill()


def case_api_key(context):
    gateway, port = start_gateway(context, "--api-key", "right-key")
    try:
        for url in (f"http://127.0.0.1:{port}", f"ws://127.0.0.1:{port}"):
            _, report, stderr = context.run("--url", url, "--api-key", "wrong-key", "--requests", "6",
                                            "--concurrency", "2", "--prompt-tokens", "8", "--max-tokens", "4",
                                            "--json", expect_status=1)
            text = json.dumps(report, indent=1)
            check(report["failed"] == 6 and report["completed"] == 0, f"{url}: expected 6 failures:\n{text}")
            check(report["errors"]["http_status"] == 6 and report["http_statuses"] == {"401": 6},
                  f"{url}: expected six HTTP 401 errors:\n{text}")
            check("401" in stderr, f"{url}: stderr does not name the status:\n{stderr}")
            _, good, _ = context.run("--url", url, "--api-key", "right-key", "--requests", "2",
                                     "--prompt-tokens", "8", "--max-tokens", "4", "--json", expect_status=0)
            check(good["completed"] == 2, f"{url}: the right key failed: {json.dumps(good)}")
    finally:
        gateway.kill()


def case_progress(context):
    gateway, port = start_gateway(context)
    try:
        args = ["--url", f"http://127.0.0.1:{port}", "--duration", "1.3", "--concurrency", "2", "--max-tokens", "8",
                "--prompt-tokens", "8", "--json"]
        _, report, stderr = context.run(*args, "--progress", expect_status=0)
        check(re.search(r"^loom-loadgen: \d+\.\d s  done \d+  [\d.]+ tokens/s  errors 0$", stderr, re.M),
              f"no progress line on stderr:\n{stderr}")
        check(report["duration_s"] >= 1.3 and report["completed"] > 0 and report["failed"] == 0,
              f"the duration run: {json.dumps(report)}")
        check(report["output_tokens"] == report["asked_output_tokens"], json.dumps(report))
        _, _, quiet = context.run(*args, expect_status=0)
        check("done" not in quiet, f"a progress line although stderr is not a terminal:\n{quiet}")
        interrupt_a_long_run(context, port)
    finally:
        gateway.kill()


def interrupt_a_long_run(context, port):
    """A 60 s run interrupted after its first progress line: it reports what finished and exits with 130."""
    process = subprocess.Popen([context.loadgen, "--url", f"http://127.0.0.1:{port}", "--duration", "60",
                                "--concurrency", "2", "--prompt-tokens", "8", "--max-tokens", "8", "--json",
                                "--progress"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    watchdog = threading.Timer(RUN_SECONDS, process.kill)  # a hang fails the test instead of blocking it
    watchdog.start()
    try:
        for line in process.stderr:  # the first progress line: the run is under way
            if " done " in line:
                break
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate()
    finally:
        watchdog.cancel()
    check(process.returncode == 130, f"exit status {process.returncode} after Ctrl-C, expected 130\n{stderr}")
    report = json.loads(stdout)
    check(report["completed"] > 0 and report["failed"] == 0 and report["duration_s"] < 30,
          f"the interrupted run's report: {json.dumps(report)}")
    check("interrupted" in stderr, f"stderr does not say it was interrupted:\n{stderr}")


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def case_unreachable(context):
    port = free_port()  # closed again: nothing listens there
    for url in (f"http://127.0.0.1:{port}", f"ws://127.0.0.1:{port}"):
        _, report, stderr = context.run("--url", url, "--requests", "5", "--concurrency", "2", "--json",
                                        expect_status=1)
        check(report["failed"] == 5 and report["completed"] == 0 and report["errors"]["connect"] == 5,
              f"{url}: expected five connect errors: {json.dumps(report)}")
        check("cannot connect" in stderr and "no request reached the server" in stderr,
              f"{url}: stderr does not say the server is unreachable:\n{stderr}")
    _, _, stderr = context.run("--url", "http://unresolvable.invalid:80", "--requests", "1", expect_status=1)
    check("cannot resolve unresolvable.invalid" in stderr, stderr)


def case_usage(context):
    bad = [
        (["--requests", "0"], "--requests"),
        (["--requests", "3", "--duration", "1"], "not both"),
        (["--prompt-tokens", "9:3"], "--prompt-tokens"),
        (["--max-tokens", "many"], "--max-tokens"),
        (["--concurrency", "0"], "--concurrency"),
        (["--url", "https://example.com"], "TLS"),
        (["--url", "localhost:8080"], "--url"),
        (["--endpoint", "both", "--url", "ws://127.0.0.1:1"], "--endpoint"),
        (["--timeout"], "--timeout needs a value"),
        (["--frobnicate"], "unknown option --frobnicate"),
    ]
    for args, words in bad:
        result = subprocess.run([context.loadgen, *args], capture_output=True, text=True, timeout=RUN_SECONDS)
        check(result.returncode == 2, f"{args}: exit status {result.returncode}, expected 2\n{result.stderr}")
        check(words in result.stderr and "--help" in result.stderr, f"{args}: stderr does not say '{words}':\n"
              f"{result.stderr}")
        check(result.stdout == "", f"{args}: printed a report:\n{result.stdout}")
    result = subprocess.run([context.loadgen, "--help"], capture_output=True, text=True, timeout=RUN_SECONDS)
    check(result.returncode == 0 and "Usage: loom-loadgen" in result.stdout, result.stdout + result.stderr)


# ---- Small OpenAI-shaped servers: the first path segment picks the behaviour (the URL's prefix) ----

PACED_GAP_SECONDS = 0.4


def chunk_event(text):
    return "data: " + json.dumps({"object": "text_completion", "choices": [{"index": 0, "text": text}]}) + "\n\n"


class FakeServer(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), FakeHandler)
        self.connections = 0
        self.lock = threading.Lock()
        self.stop = threading.Event()


class FakeHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def setup(self):
        super().setup()
        with self.server.lock:
            self.server.connections += 1

    def log_message(self, *args):
        pass

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        mode = self.path.split("/")[1]
        if mode == "silent":
            self.server.stop.wait(20)  # never answers: the client's timeout ends the request
            self.close_connection = True
            return
        if mode == "paced":  # one token, a pause, the next: the client must time each as it arrives
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(chunk_event("a").encode())
            self.wfile.flush()
            self.server.stop.wait(PACED_GAP_SECONDS)
            self.wfile.write((chunk_event("b") + "data: [DONE]\n\n").encode())
            self.close_connection = True
            return
        if mode == "json":
            self.answer(200, "application/json", b'{"choices": []}')
            return
        events = {
            "nousage": chunk_event("a") + chunk_event("b") + chunk_event("") + chunk_event("c") + "data: [DONE]\n\n",
            "nodone": chunk_event("a") + chunk_event("b"),
            "error": chunk_event("a") + 'data: {"error": {"message": "boom"}}\n\n' + "data: [DONE]\n\n",
            "long": "data: " + json.dumps({"choices": [{"text": "x" * 4000}]}) + "\n\ndata: [DONE]\n\n",
            "keepalive": chunk_event("a") + chunk_event("b") + "data: [DONE]\n\n",
            "holdopen": chunk_event("a") + chunk_event("b") + "data: [DONE]\n\n",
            "flood": chunk_event("a") * 500 + "data: [DONE]\n\n",
        }[mode]
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        if mode == "keepalive":  # chunked, so the connection stays open for the next request
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            data = events.encode()
            self.wfile.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(data), data))
            return
        if mode == "holdopen":  # a body without a length, and the connection held open after [DONE]
            self.end_headers()
            self.wfile.write(events.encode())
            self.wfile.flush()
            self.server.stop.wait(20)
            self.close_connection = True
            return
        self.send_header("Connection", "close")  # the body ends when the connection does
        self.end_headers()
        self.wfile.write(events.encode())
        self.close_connection = True

    def answer(self, status, content_type, body):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def case_fake_servers(context):
    server = FakeServer()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    common = ["--requests", "4", "--concurrency", "2", "--json", "--no-calibrate"]
    try:
        _, report, _ = context.run("--url", base + "/nousage", *common, expect_status=0)
        check(report["completed"] == 4 and report["token_count_source"] == "chunks" and report["output_tokens"] == 12,
              f"without usage, the three non-empty chunks of each answer are its tokens: {json.dumps(report)}")
        check(report["prompt_tokens"] is None and report["prompt_tokens_per_s"] is None, json.dumps(report))

        _, report, _ = context.run("--url", base + "/paced", *common, expect_status=0)
        ttft, itl = report["ttft_ms"], report["itl_ms"]
        check(ttft["max"] < PACED_GAP_SECONDS * 1000 / 2 and itl["count"] == 4 and
              itl["min"] >= PACED_GAP_SECONDS * 1000 * 0.9,
              "the first token must be timed when it arrives, not with the rest of the stream: "
              f"{json.dumps(report, indent=1)}")

        # [DONE] ends the request even when the server keeps the body open (within a second, not --timeout).
        _, report, _ = context.run("--url", base + "/holdopen", "--requests", "2", "--concurrency", "2",
                                   "--timeout", "10", "--json", "--no-calibrate", expect_status=0)
        check(report["completed"] == 2 and report["e2e_ms"]["max"] < 5000,
              f"a stream held open after [DONE]: {json.dumps(report, indent=1)}")

        # 500 chunks for max_tokens 4: all counted, but each request keeps at most 4 + 64 gaps.
        _, report, _ = context.run("--url", base + "/flood", *common, "--max-tokens", "4", expect_status=0)
        check(report["output_tokens"] == 2000 and report["itl_ms"]["count"] == 4 * 68,
              f"a server streaming more than asked: {json.dumps(report, indent=1)}")

        before = server.connections
        _, report, _ = context.run("--url", base + "/keepalive", "--requests", "6", "--concurrency", "2", "--json",
                                   "--no-calibrate", expect_status=0)
        check(report["completed"] == 6, json.dumps(report))
        check(server.connections - before == 2, f"6 requests on 2 streams took {server.connections - before} "
              "connections: keep-alive was not reused")

        failures = [("/silent", ["--timeout", "0.5"], "timeout"), ("/json", [], "protocol"),
                    ("/nodone", [], "protocol"), ("/error", [], "server"),
                    ("/long", ["--max-message-bytes", "1024"], "protocol")]
        for path, extra, kind in failures:
            _, report, stderr = context.run("--url", base + path, *common, *extra, expect_status=1)
            check(report["failed"] == 4 and report["errors"][kind] == 4,
                  f"{path}: expected four {kind} errors: {json.dumps(report, indent=1)}")
            check(kind in stderr, f"{path}: stderr does not name the kind:\n{stderr}")

        # A WebSocket server that accepts the connection and never answers the upgrade: a timeout too.
        with socket.socket() as silent:
            silent.bind(("127.0.0.1", 0))
            silent.listen(8)
            _, report, stderr = context.run("--url", f"ws://127.0.0.1:{silent.getsockname()[1]}", *common,
                                            "--timeout", "0.5", expect_status=1)
            check(report["failed"] == 4 and report["errors"]["timeout"] == 4,
                  f"a silent WebSocket server: expected four timeouts: {json.dumps(report, indent=1)}")
    finally:
        server.stop.set()
        server.shutdown()
        server.server_close()


CASES = {
    "http": case_http, "websocket": case_websocket, "repeatable": case_repeatable, "api_key": case_api_key,
    "progress": case_progress, "unreachable": case_unreachable, "usage": case_usage,
    "fake_servers": case_fake_servers, "shared_prefix": case_shared_prefix,
}


def main():
    if len(sys.argv) != 5 or sys.argv[1] not in CASES:
        sys.exit(__doc__)
    CASES[sys.argv[1]](Context(*sys.argv[2:5]))
    print(f"{TEST_NAME} {sys.argv[1]}: ok")


if __name__ == "__main__":
    main()
