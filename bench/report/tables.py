#!/usr/bin/env python3
"""bench/report.sh's tables: reads the JSON documents the run left in OUT/json (loom bench, loom-loadgen)
and writes OUT/report.md plus the data files that bench/report/plots.gp draws (OUT/*.dat).

    python3 bench/report/tables.py OUT
"""
import glob
import json
import os
import sys


def load(path):
    with open(path) as f:
        return json.load(f)


def fmt(value, digits=1):
    return "-" if value is None else f"{value:,.{digits}f}"


def trio(stats):
    return " / ".join(fmt(stats[p]) for p in ("p50", "p90", "p99"))


def single_stream_table(docs):
    lines = ["| shape | type | MiB | prefill t/s | of bound | decode t/s | of bandwidth | batched t/s | "
             "batched step / single step |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for shape, doc in docs:
        prefill = next((r for r in doc["results"] if r["kind"] == "prefill"), None)
        decode = next((r for r in doc["results"] if r["kind"] == "generate" and r["depth"] == 0), None)
        batched = [r for r in doc["results"] if r["kind"] == "batched"]
        single = next((r for r in batched if r["batch"] == 1), None)
        widest = max(batched, key=lambda r: r["batch"]) if batched else None
        cells = [shape, doc["model"]["type"], fmt(doc["model"]["weight_bytes"] / 2**20)]
        if prefill:
            cells += [f"{prefill['test']}: {fmt(prefill['tokens_per_s']['median'])}",
                      f"{prefill['of_bound']:.3f} {prefill['bound']}"]
        else:
            cells += ["-", "-"]
        if decode:
            cells += [f"{decode['test']}: {fmt(decode['tokens_per_s']['median'])}", f"{decode['of_bandwidth']:.3f}"]
        else:
            cells += ["-", "-"]
        if widest and widest is not single:
            cells.append(f"b{widest['batch']}: {fmt(widest['tokens_per_s']['median'])}")
            ratio = widest["ms_per_step"]["median"] / single["ms_per_step"]["median"] if single else None
            cells.append(f"{fmt(ratio, 2)}x" if ratio else "-")
        else:
            cells += ["-", "-"]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def load_table(runs):
    lines = ["| streams | requests | output tokens/s | requests/s | TTFT p50 / p90 / p99 ms | "
             "inter-token p50 / p90 / p99 ms | end-to-end p50 ms | preemptions | failed |",
             "|---:|---:|---:|---:|---|---|---:|---:|---:|"]
    for n, r in runs:
        lines.append(f"| {n} | {r['completed']} | {fmt(r['output_tokens_per_s'])} | {fmt(r['requests_per_s'], 2)} | "
                     f"{trio(r['ttft_ms'])} | {trio(r['itl_ms'])} | {fmt(r['e2e_ms']['p50'])} | "
                     f"{r.get('server_preemptions', '-')} | {r['failed']} |")
    return lines


def write_columns(path, header, rows):
    with open(path, "w") as f:
        f.write(" ".join(header) + "\n")
        for row in rows:
            f.write(" ".join(str(v) for v in row) + "\n")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    j = os.path.join(out, "json")
    meta = load(os.path.join(j, "meta.json"))

    bench_docs = []
    for path in sorted(glob.glob(os.path.join(j, "bench-*.json"))):
        shape = os.path.basename(path)[len("bench-"):-len(".json")].rsplit("-", 1)[0]
        bench_docs.append((shape, load(path)))
    if not bench_docs:
        sys.exit(f"tables.py: no bench-*.json in {j}")
    order = ["f32", "f16", "bf16", "q8_0", "q4_0", "q4_k", "q5_k", "q6_k"]
    params = {}  # shapes from the smallest model up
    for shape, doc in bench_docs:
        params[shape] = min(params.get(shape, doc["model"]["params"]), doc["model"]["params"])
    bench_docs.sort(key=lambda d: (params[d[0]], order.index(d[1]["model"]["type"].lower())
                                   if d[1]["model"]["type"].lower() in order else 99))

    runs = sorted(((int(os.path.basename(p)[len("load-c"):-len(".json")]), load(p))
                   for p in glob.glob(os.path.join(j, "load-c*.json"))), key=lambda r: r[0])
    depth = load(os.path.join(j, "depth.json"))
    prefix_none = load(os.path.join(j, "prefix-none.json"))
    prefix_shared = load(os.path.join(j, "prefix-shared.json"))

    # Data for the plots.
    write_columns(os.path.join(out, "throughput.dat"), ["streams", "tokens_per_s", "ttft_p50", "itl_p50", "itl_p99"],
                  [(n, r["output_tokens_per_s"], r["ttft_ms"]["p50"], r["itl_ms"]["p50"], r["itl_ms"]["p99"])
                   for n, r in runs])
    for name in ("ttft_ms", "itl_ms"):
        header = ["percentile"] + [f'"{n} stream{"s" if n > 1 else ""}"' for n, _ in runs]
        rows = [[p] + [r[name]["quantiles"][p] if r[name]["quantiles"] else "NaN" for _, r in runs]
                for p in range(101)]
        write_columns(os.path.join(out, name.split("_")[0] + ".dat"), header, rows)
    generated = [r for r in depth["results"] if r["kind"] == "generate"]
    base = next((r["tokens_per_s"]["median"] for r in generated if r["depth"] == 0), None)
    write_columns(os.path.join(out, "depth.dat"), ["depth", "tokens_per_s", "min", "max", "of_depth_0"],
                  [(r["depth"], r["tokens_per_s"]["median"], r["tokens_per_s"]["min"], r["tokens_per_s"]["max"],
                    r["tokens_per_s"]["median"] / base if base else "NaN") for r in generated])

    machine = bench_docs[0][1]["machine"]
    served = depth["model"]
    first_run = runs[0][1] if runs else None
    md = [
        "# loom throughput report",
        "",
        f"Made by `{meta['command']}` on {meta['date']} at commit {meta['commit']}: {meta['cpu']}, "
        f"{meta['threads']} threads (load average at the end {' / '.join(meta['load_average'])}). "
        f"The machine, probed by the first `loom bench`: read bandwidth {machine['bandwidth_bytes_per_s'] / 1e9:.1f} GB/s, "
        f"int8 peak {machine['int8_peak_macs_per_s'] / 1e9:.1f} GMAC/s ({machine['int8_instruction']}), "
        f"FP32 peak {machine['fma_peak_flops_per_s'] / 1e9:.1f} GFLOP/s ({machine['fma_instruction']}).",
        "",
        "## One stream: prefill and decode for every weight type (`loom bench`)",
        "",
        "Medians of the repetitions. *Of bound*: prefill against the int8 peak (quantized types) or the FP32 "
        "peak (F32/F16/BF16), decode against the read bandwidth (every weight once per token). *Batched*: that "
        "many sequences decoding together, one token each per step; the last column is what one such step "
        "costs over a step of one sequence.",
        "",
        *single_stream_table(bench_docs),
        "",
        f"## Through the gateway: {os.path.basename(served['path'])}, OpenAI HTTP/SSE (`loom-loadgen`)",
        "",
        (f"Each stream sends its requests one after another (prompts of about "
         f"{first_run['asked_prompt_tokens'] // max(first_run['completed'], 1)} tokens, "
         f"max_tokens {first_run['asked_output_tokens'] // max(first_run['completed'], 1)}, greedy, "
         f"ignore_eos); the server runs with its default KV cache. Preemptions are the server's "
         f"(`loom_scheduler_preemptions_total`) during the run." if first_run else ""),
        "",
        *load_table(runs),
        "",
        "![Aggregate throughput and latency against concurrent streams](throughput.png)",
        "",
        "![Distributions of time to first token and inter-token latency](latency.png)",
        "",
        "## Time to first token with and without a cached prefix",
        "",
        f"One stream, {prefix_none['completed']} requests of about "
        f"{prefix_none['asked_prompt_tokens'] // max(prefix_none['completed'], 1)} prompt tokens each; with "
        f"`--shared-prefix-tokens {prefix_shared['shared_prefix_tokens']}` every prompt opens with the same text, "
        "which the server's prefix cache holds after the first request.",
        "",
        "| prompts | TTFT p50 / p90 / p99 ms | end-to-end p50 ms |",
        "|---|---|---:|",
        f"| all different | {trio(prefix_none['ttft_ms'])} | {fmt(prefix_none['e2e_ms']['p50'])} |",
        f"| {prefix_shared['shared_prefix_tokens']} tokens shared | {trio(prefix_shared['ttft_ms'])} | "
        f"{fmt(prefix_shared['e2e_ms']['p50'])} |",
        "",
        f"## Decode against context length: {os.path.basename(served['path'])} (`loom bench -d`)",
        "",
        "| context positions | decode t/s | min | max | of the rate at 0 |",
        "|---:|---:|---:|---:|---:|",
        *[f"| {r['depth']} | {fmt(r['tokens_per_s']['median'])} | {fmt(r['tokens_per_s']['min'])} | "
          f"{fmt(r['tokens_per_s']['max'])} | {fmt(r['tokens_per_s']['median'] / base, 3) if base else '-'} |"
          for r in generated],
        "",
        "![Decode tokens/s against the context already in the cache](decode_vs_context.png)",
        "",
    ]
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write("\n".join(md))


if __name__ == "__main__":
    main()
