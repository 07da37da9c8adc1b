#!/usr/bin/env python3
"""bench/report.sh --quick, run as a user runs it, into a temporary folder: it exits 0 and leaves the
report (a row per weight type, a row per stream count, the prefix and context tables), its JSON documents
with no failed request, and three PNG plots.

    report_test.py REPO_ROOT BUILD_DIR SHARED_DIR
"""
import json
import os
import subprocess
import sys
import tempfile

TYPES = ["f32", "f16", "bf16", "q8_0", "q4_0", "q4_k", "q5_k", "q6_k"]
PLOTS = ["throughput.png", "latency.png", "decode_vs_context.png"]


def fail(message):
    print(f"bench_report_quick: {message}", file=sys.stderr)
    sys.exit(1)


def check(condition, message):
    if not condition:
        fail(message)


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    root, build, shared = sys.argv[1:4]
    vocab = os.path.join(shared, "vocab", "ggml-vocab-llama-spm.gguf")
    check(os.path.isfile(vocab), f"needs {vocab}")
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "results")
        env = dict(os.environ, LOOM_SHARED_DIR=shared, LOOM_BENCH_MODELS=os.path.join(tmp, "models"))
        run = subprocess.run(["bash", os.path.join(root, "bench", "report.sh"), "--quick", "--out", out,
                              "--build", build, "--threads", "2"], capture_output=True, text=True, env=env,
                             timeout=600)
        check(run.returncode == 0, f"report.sh --quick exited {run.returncode}\n{run.stdout}\n{run.stderr}")
        check("report: done in" in run.stderr, f"no closing progress line:\n{run.stderr}")

        docs = {name: json.load(open(os.path.join(out, "json", name))) for name in os.listdir(os.path.join(out, "json"))}
        for t in TYPES:
            doc = docs.get(f"bench-tiny-{t}.json")
            check(doc is not None, f"no loom bench document for {t}: {sorted(docs)}")
            check(doc["model"]["type"].lower() == t, f"bench-tiny-{t}.json measured a {doc['model']['type']} model")
            kinds = [r["kind"] for r in doc["results"]]
            check(kinds == ["prefill", "generate", "batched", "batched"], f"{t}: tests {kinds}")
        for n in (1, 4):
            load = docs.get(f"load-c{n}.json")
            check(load is not None, f"no loom-loadgen document for {n} streams")
            check(load["failed"] == 0 and load["completed"] == 8 and load["concurrency"] == n, json.dumps(load)[:2000])
            check("server_preemptions" in load, f"no preemption count at {n} streams")
        check(docs["prefix-shared.json"]["shared_prefix_tokens"] == 96, "the shared-prefix run shared nothing")
        check(docs["prefix-none.json"]["shared_prefix_tokens"] == 0, "the plain run shared a prefix")
        depths = [r["depth"] for r in docs["depth.json"]["results"]]
        check(depths == [0, 64, 256], f"decode vs context measured depths {depths}")

        report = open(os.path.join(out, "report.md")).read()
        for t in TYPES:
            name = docs[f"bench-tiny-{t}.json"]["model"]["type"]  # as loom names it: q4_K
            check(f"| tiny | {name} |" in report, f"report.md has no row for {name}:\n{report}")
        for row in ("| 1 | 8 |", "| 4 | 8 |", "| all different |", "| 96 tokens shared |", "| 256 |"):
            check(row in report, f"report.md has no row starting {row!r}:\n{report}")
        for plot in PLOTS:
            path = os.path.join(out, plot)
            check(os.path.isfile(path), f"no {plot}")
            with open(path, "rb") as f:
                head = f.read(8)
            check(head == b"\x89PNG\r\n\x1a\n", f"{plot} is not a PNG")
            check(os.path.getsize(path) > 5000, f"{plot} is nearly empty ({os.path.getsize(path)} bytes)")
            check(f"]({plot})" in report, f"report.md does not show {plot}")
        check(not any(name.endswith(".dat") for name in os.listdir(out)), "data files left in the results folder")
    print("bench_report_quick: ok")


if __name__ == "__main__":
    main()
