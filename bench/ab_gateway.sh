#!/usr/bin/env bash
# Two builds of loom-gateway, A and B, serving the same model, measured alternately with loom-loadgen over
# OpenAI HTTP/SSE (A, B, A, B, ...: a noisy shared machine drifts, alternation spreads the drift over both):
#   prefill   one stream, prompts of ~P tokens, max_tokens 1: prompt tokens/s from the median TTFT
#   decode    one stream, short prompts, max_tokens 128: tokens/s from the median inter-token latency
#   streams   S concurrent streams, 2 S requests, prompts of ~128 tokens, max_tokens 64: aggregate output
#             tokens/s, the server's preemptions and the requests that failed (loadgen's 120 s timeout)
# Prints each round's figures and the medians with their ratio B / A.
#
#   bench/ab_gateway.sh A_BIN_DIR B_BIN_DIR MODEL [--rounds N] [--streams S] [--prompt P] [-- GATEWAY_ARGS...]
#
# A_BIN_DIR and B_BIN_DIR hold each build's loom-gateway (for example a worktree of the commit before a
# change, built beside: `git worktree add /tmp/base COMMIT && cmake -S /tmp/base -B /tmp/base/build &&
# cmake --build /tmp/base/build --target loom-gateway`); loom-loadgen is taken from B_BIN_DIR. Arguments
# after -- go to both gateways (e.g. -- --kv-cache-mb 512 to compare with the same KV cache).
set -euo pipefail

[[ $# -ge 3 ]] || { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 2; }
a_bin=$1 b_bin=$2 model=$3
shift 3
rounds=3 streams=64 prompt=512
gateway_args=()
while (($#)); do
  case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --streams) streams=$2; shift 2 ;;
    --prompt) prompt=$2; shift 2 ;;
    --) shift; gateway_args=("$@"); break ;;
    *) echo "ab_gateway.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
for bin in "$a_bin" "$b_bin"; do
  [[ -x "$bin/loom-gateway" ]] || { echo "ab_gateway.sh: no loom-gateway in $bin" >&2; exit 2; }
done
[[ -f "$model" ]] || { echo "ab_gateway.sh: no model at $model" >&2; exit 2; }
loadgen="$b_bin/loom-loadgen"
work=$(mktemp -d)
trap 'kill $(jobs -p) 2> /dev/null || true; rm -rf "$work"' EXIT

# serve BIN_DIR: starts that gateway on a free port; sets $url and $gateway.
serve() {
  local port
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  "$1/loom-gateway" --model "$model" --host 127.0.0.1 --port "$port" "${gateway_args[@]}" > "$work/gateway.log" 2>&1 &
  gateway=$!
  for _ in $(seq 1 600); do
    grep -q "ready to serve" "$work/gateway.log" && break
    kill -0 $gateway 2> /dev/null || { cat "$work/gateway.log" >&2; exit 1; }
    sleep 0.1
  done
  url="http://127.0.0.1:$port"
}

# figures: one line "prefill_tps decode_tps streams_tps preemptions failed" from the three runs' JSON.
figures() {
  python3 - "$work" "$prompt" << 'EOF'
import json, sys, urllib.request
work, prompt = sys.argv[1], int(sys.argv[2])
load = lambda name: json.load(open(f"{work}/{name}.json"))
prefill, decode, streams = load("prefill"), load("decode"), load("streams")
tokens = prefill["prompt_tokens"] / prefill["completed"]  # the server's own count of a prompt
print(f"{tokens / prefill['ttft_ms']['p50'] * 1e3:.1f} {1e3 / decode['itl_ms']['p50']:.1f} "
      f"{streams['output_tokens_per_s']:.1f} {open(f'{work}/preemptions').read().strip()} {streams['failed']}")
EOF
}

preemptions() {
  python3 -c '
import sys, urllib.request
text = urllib.request.urlopen(sys.argv[1] + "/metrics", timeout=10).read().decode()
print(next((l.split()[-1] for l in text.splitlines() if l.startswith("loom_scheduler_preemptions_total ")), "0"))' "$url"
}

echo "round side prefill_tok/s decode_tok/s ${streams}_streams_tok/s preemptions failed"
for round in $(seq 1 "$rounds"); do
  for side in A B; do
    bin=$a_bin
    [[ $side == B ]] && bin=$b_bin
    serve "$bin"
    "$loadgen" --url "$url" --concurrency 1 --requests 8 --prompt-tokens "$prompt" --max-tokens 1 --seed "$round" \
      --quiet --json > "$work/prefill.json"
    "$loadgen" --url "$url" --concurrency 1 --requests 4 --prompt-tokens 16 --max-tokens 128 --seed "$round" \
      --quiet --json > "$work/decode.json"
    before=$(preemptions)
    "$loadgen" --url "$url" --concurrency "$streams" --requests $((streams * 2)) --prompt-tokens 128 --max-tokens 64 \
      --seed "$round" --quiet --json > "$work/streams.json" || true  # failures are counted, not fatal
    echo $(($(preemptions | cut -d. -f1) - ${before%.*})) > "$work/preemptions"
    kill $gateway; wait $gateway 2> /dev/null || true
    echo "$round $side $(figures)" | tee -a "$work/rounds"
  done
done
python3 - "$work/rounds" << 'EOF'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1])]
names = ["prefill tokens/s", "single-stream decode tokens/s", "aggregate tokens/s at the streams", "preemptions",
         "failed requests (timeouts) at the streams"]
print("median over the rounds:           A          B      B / A")
for i, name in enumerate(names):
    a = statistics.median(float(r[2 + i]) for r in rows if r[1] == "A")
    b = statistics.median(float(r[2 + i]) for r in rows if r[1] == "B")
    print(f"{name:34s} {a:10.1f} {b:10.1f} {b / a if a else float('nan'):9.2f}")
EOF
