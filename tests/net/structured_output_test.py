#!/usr/bin/python3
"""Constrained output end to end, checked by an independent validator.

Starts loom-gateway on a random-weight model with a real 32,000-token vocabulary (its text is gibberish,
so only the constraint can make it valid) and asks for JSON under a table of schemas, over many seeds,
through OpenAI's HTTP routes (whole and streamed, response_format and llama.cpp's json_schema) and the
WebSocket protocol (params.json_schema). Every answer that did not end by length must parse and validate
against its schema with Debian's python3-jsonschema (formats checked too), with its properties in the
schema's order; an answer cut by max_tokens must say "length". A GBNF grammar, a bad schema and a bad grammar (400 naming the field) are checked too.

Usage: structured_output_test.py GATEWAY_BINARY SHARED_DIR [--seeds N]
"""

import asyncio
import json
import re
import signal
import subprocess
import sys
import urllib.error
import urllib.request

import gateway_process

TEST_NAME = "structured_output_test"

try:
    import jsonschema
except ImportError:
    sys.exit(f"{TEST_NAME}: the Python module 'jsonschema' is missing: install Debian's package with "
             "'apt-get install -y python3-jsonschema' (scripts/test does), and run this with /usr/bin/python3")
try:
    import websockets.client
except ImportError:
    sys.exit(f"{TEST_NAME}: the Python module 'websockets' is missing: apt-get install -y python3-websockets")

MAX_TOKENS = 160
REQUEST_SECONDS = 120

# Strings are bounded (maxLength, enum, format, pattern) so that a model whose every token is equally
# likely reaches a closing quote: with 32,000 tokens and few that close a string, a free string would run
# to max_tokens, and each cut answer tests less.
SCHEMAS = [
    ("person", {
        "type": "object", "additionalProperties": False, "required": ["name", "age"],
        "properties": {"name": {"type": "string", "maxLength": 12},
                       "age": {"type": "integer", "minimum": 0, "maximum": 150}}}),
    ("enum_and_const", {
        "type": "object", "additionalProperties": False, "required": ["color", "kind", "flag"],
        "properties": {"color": {"enum": ["red", "green", "blue", 7, None]},
                       "kind": {"const": "fixed"}, "flag": {"type": "boolean"}}}),
    ("array_bounds", {
        "type": "array", "items": {"type": "integer", "minimum": -5, "maximum": 99}, "minItems": 1, "maxItems": 4}),
    ("tuple", {
        "type": "array", "prefixItems": [{"type": "boolean"}, {"enum": ["x", "y"]}], "items": False}),
    ("nested_optional", {
        "type": "object", "additionalProperties": False, "required": ["id"],
        "properties": {"id": {"type": "string", "format": "uuid"},
                       "when": {"type": "string", "format": "date"},
                       "tags": {"type": "array", "maxItems": 2, "items": {"type": "string", "maxLength": 5}}}}),
    ("pattern", {
        "type": "object", "additionalProperties": False, "required": ["code"],
        "properties": {"code": {"type": "string", "pattern": "^[A-Z]{2}-[0-9]{3}$"}}}),
    ("any_of", {
        "anyOf": [{"type": "integer", "minimum": 10, "maximum": 20}, {"type": "boolean"},
                  {"type": "string", "enum": ["none"]}]}),
    ("ref_tree", {
        "$defs": {"node": {"type": "object", "additionalProperties": False, "required": ["v"],
                           "properties": {"v": {"type": "integer", "minimum": 0, "maximum": 9},
                                          "kids": {"type": "array", "maxItems": 2,
                                                   "items": {"$ref": "#/$defs/node"}}}}},
        "$ref": "#/$defs/node"}),
    ("times", {
        "type": "object", "additionalProperties": False, "required": ["at", "stamp", "mail"],
        "properties": {"at": {"type": "string", "format": "time"},
                       "stamp": {"type": "string", "format": "date-time"},
                       "mail": {"type": "string", "format": "email"}}}),
    ("number_null", {
        "type": "object", "additionalProperties": False, "required": ["x", "y"],
        "properties": {"x": {"type": "number"}, "y": {"type": ["null", "integer"], "maximum": 1000}}}),
]

GRAMMAR = 'root ::= "(" digit ("+" digit){0,3} ")"\ndigit ::= [0-9]\n'


def fail(message):
    gateway_process.fail(TEST_NAME, message)


def post(port, path, body):
    """(status, parsed JSON body) of a POST."""
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=REQUEST_SECONDS) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def completion(port, body, stream):
    """(text, finish_reason) of a /v1/completions request, whole or streamed (SSE chunks joined)."""
    body = dict(body, stream=stream)
    status, text = post(port, "/v1/completions", body)
    if status != 200:
        fail(f"status {status} for {json.dumps(body)[:300]}: {text[:500]}")
    if not stream:
        choice = json.loads(text)["choices"][0]
        return choice["text"], choice["finish_reason"]
    pieces, reason = [], None
    for line in text.splitlines():
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        choice = json.loads(line[len("data: "):])["choices"][0]
        pieces.append(choice.get("text") or "")
        reason = choice.get("finish_reason") or reason
    return "".join(pieces), reason


async def websocket_completion(port, schema, seed):
    async with websockets.client.connect(f"ws://127.0.0.1:{port}/v1/ws", max_size=8 << 20) as ws:
        hello = json.loads(await asyncio.wait_for(ws.recv(), REQUEST_SECONDS))  # the server's first frame
        if hello["type"] != "hello":
            fail("websocket: the first frame is not a hello: " + json.dumps(hello))
        await ws.send(json.dumps({"type": "generate", "id": "s", "prompt": "Data:",
                                  "params": {"max_tokens": MAX_TOKENS, "seed": seed, "temperature": 1.0,
                                             "json_schema": schema}}))
        text = ""
        while True:
            frame = json.loads(await asyncio.wait_for(ws.recv(), REQUEST_SECONDS))
            if frame["type"] == "token":
                text += frame["text"]
            elif frame["type"] == "done":
                return text, frame["finish_reason"]
            else:
                fail("websocket: " + json.dumps(frame))


class Tally:
    def __init__(self):
        self.valid = 0
        self.cut = 0
        self.problems = []

    def check(self, where, schema, text, reason):
        if reason == "length":
            self.cut += 1
            return
        if reason not in ("stop", "eos"):
            self.problems.append(f"{where}: finish_reason {reason!r}: {text!r}")
            return
        try:
            value = json.loads(text)
            jsonschema.validate(value, schema, format_checker=jsonschema.FormatChecker())
            # Properties come in the schema's order, as OpenAI writes them.
            listed = list(schema.get("properties", {}))
            if isinstance(value, dict) and [k for k in value if k in listed] != [k for k in listed if k in value]:
                self.problems.append(f"{where}: properties out of the schema's order {listed}: {text!r}")
                return
            self.valid += 1
        except (ValueError, jsonschema.ValidationError) as error:
            self.problems.append(f"{where}: {text!r}: {str(error).splitlines()[0]}")


def check_refusals(port, problems):
    cases = [
        ({"prompt": "x", "response_format": {"type": "json_schema",
                                             "json_schema": {"name": "n", "schema": {"type": "integer", "multipleOf": 3}}}},
         "response_format.json_schema.schema", "multipleOf"),
        ({"prompt": "x", "json_schema": {"type": "object", "properties": {"a": {"if": {}}}}}, "json_schema", "if"),
        ({"prompt": "x", "grammar": 'root ::= "a" | (\n'}, "grammar", "line 1"),
    ]
    for body, param, words in cases:
        status, text = post(port, "/v1/completions", body)
        error = json.loads(text).get("error", {}) if text.startswith("{") else {}
        if status != 400 or error.get("param") != param or words not in error.get("message", ""):
            problems.append(f"refusal of {json.dumps(body)}: status {status}, {text[:300]}")


def main():
    args = sys.argv[1:]
    seeds = 6
    if "--seeds" in args:
        seeds = int(args[args.index("--seeds") + 1])
        del args[args.index("--seeds"):args.index("--seeds") + 2]
    if len(args) != 2:
        sys.exit(__doc__)
    binary, shared_dir = args
    model = gateway_process.shared_path(TEST_NAME, shared_dir, "models/synth11M-q8_0.gguf")
    gateway = gateway_process.Gateway(TEST_NAME, binary, model, ["--kv-cache-mb", "64"])
    tally = Tally()
    try:
        port = gateway.wait_ready()
        for index, (name, schema) in enumerate(SCHEMAS):
            for seed in range(seeds):
                stream = (seed + index) % 2 == 1
                if seed % 2 == 0:
                    body = {"prompt": "Data:", "max_tokens": MAX_TOKENS, "seed": seed, "temperature": 1.0,
                            "response_format": {"type": "json_schema",
                                                "json_schema": {"name": name, "strict": True, "schema": schema}}}
                else:
                    body = {"prompt": "Data:", "max_tokens": MAX_TOKENS, "seed": seed, "temperature": 1.0,
                            "json_schema": schema}
                text, reason = completion(port, body, stream)
                tally.check(f"{name} seed {seed} {'streamed' if stream else 'whole'}", schema, text, reason)
            text, reason = asyncio.run(websocket_completion(port, schema, 100 + index))
            tally.check(f"{name} websocket", schema, text, reason)
        for seed in range(seeds):
            text, reason = completion(port, {"prompt": "Sum:", "max_tokens": 40, "seed": seed, "temperature": 1.0,
                                             "grammar": GRAMMAR}, seed % 2 == 1)
            if reason == "length" or not re.fullmatch(r"\(\d(\+\d){0,3}\)", text):
                tally.problems.append(f"grammar seed {seed}: {reason} {text!r}")
        for seed in range(seeds):
            text, reason = completion(port, {"prompt": "Obj:", "max_tokens": MAX_TOKENS, "seed": seed,
                                             "response_format": {"type": "json_object"}}, False)
            if reason != "length":
                try:
                    if not isinstance(json.loads(text), dict):
                        tally.problems.append(f"json_object seed {seed}: not an object: {text!r}")
                except ValueError as error:
                    tally.problems.append(f"json_object seed {seed}: {text!r}: {error}")
        check_refusals(port, tally.problems)
    except BaseException:
        print(gateway.output(), file=sys.stderr)
        gateway.kill()
        raise

    total = tally.valid + tally.cut
    # Most answers must complete: a test where nearly every answer is cut by max_tokens checks little.
    if tally.valid < total * 3 // 4:
        tally.problems.append(f"only {tally.valid} of {total} answers completed ({tally.cut} cut by max_tokens)")
    gateway.process.send_signal(signal.SIGTERM)
    try:
        if gateway.process.wait(30) != 0:
            tally.problems.append(f"the gateway exited with {gateway.process.returncode}")
    except subprocess.TimeoutExpired:
        gateway.kill()
        tally.problems.append("the gateway did not exit within 30 s of SIGTERM")
    if tally.problems:
        print(gateway.output(), file=sys.stderr)
        fail(f"{len(tally.problems)} problems:\n  " + "\n  ".join(tally.problems))
    print(f"{TEST_NAME}: {tally.valid} answers valid under their schemas, {tally.cut} cut by max_tokens, "
          f"{len(SCHEMAS)} schemas x ({seeds} HTTP seeds + 1 WebSocket), grammar and refusals checked")


if __name__ == "__main__":
    main()
