#!/usr/bin/env bash
# The throughput report (bench/README.md, "The report"): regenerates from scratch, on this machine, every
# figure and plot of bench/results/:
#   - single-stream prefill and decode (and batched decode at 64) for every weight type on the 110M shape
#     and the 1.1B shape (models written by `loom synth`), each with its fraction of the bandwidth or
#     compute bound (`loom bench --json`);
#   - aggregate throughput and latency percentiles at 1, 4, 16 and 64 concurrent streams through
#     loom-gateway's OpenAI API (`loom-loadgen --json`), with the server's preemption count;
#   - time to first token with and without a cached prefix (`loom-loadgen --shared-prefix-tokens`);
#   - decode against context length (`loom bench -d`);
#   - PNG plots with gnuplot (throughput vs concurrency, TTFT/ITL distributions, decode vs context) and
#     report.md with the tables (bench/report/tables.py) and the command that made them.
#
#   bench/report.sh [--out DIR] [--build DIR] [--threads N] [--quick] [--keep-models]
#
# --out DIR       where the results go (default bench/results; replaced whole)
# --build DIR     the build to use (default build; built first by scripts/setup, incremental)
# --threads N     compute threads for every test (default: the machine's cores)
# --quick         a tiny shape, few tokens, no 1.1B shape and 1 and 4 streams: checks the script in about a
#                 minute (its test does this); the figures mean nothing
# --keep-models   keep the synthetic models in the cache folder (~/.cache/loom/bench-models) for the next
#                 run instead of deleting them (the 1.1B ones take ~13 GB)
#
# Needs ../shared/vocab/ggml-vocab-llama-spm.gguf (LOOM_SHARED_DIR to place shared/ elsewhere): the gateway
# serves text, so the models get a real vocabulary. Installs gnuplot-nox and python3 when missing. A full
# run takes 10-15 minutes on a quiet 2-core machine; progress goes to stderr, the tools' own progress lines
# and messages to OUT/log.txt (its end is printed when a step fails).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="$root/bench/results"
build="$root/build"
threads="$(nproc 2>/dev/null || echo 2)"
quick=0
keep_models=0
while (($#)); do
  case "$1" in
    --out) out="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --quick) quick=1; shift ;;
    --keep-models) keep_models=1; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "report.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
[[ "$out" = /* ]] || out="$PWD/$out"
[[ "$build" = /* ]] || build="$PWD/$build"
[[ "$threads" =~ ^[1-9][0-9]*$ ]] || { echo "report.sh: --threads takes a positive integer" >&2; exit 2; }

say() { echo "report: $*" >&2; }

shared="${LOOM_SHARED_DIR:-$root/../shared}"
vocab="$shared/vocab/ggml-vocab-llama-spm.gguf"
[[ -f "$vocab" ]] || { echo "report.sh: needs $vocab (set LOOM_SHARED_DIR to the shared/ folder)" >&2; exit 1; }

missing=()
command -v gnuplot > /dev/null || missing+=(gnuplot-nox)
command -v python3 > /dev/null || missing+=(python3)
if ((${#missing[@]})); then
  say "installing ${missing[*]}"
  sudo=()
  [[ $(id -u) -eq 0 ]] || sudo=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get update -qq > /dev/null
  "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" > /dev/null
fi

say "building $build"
bash "$root/scripts/setup" "$build" >&2
bin="$build/bin"

types=(f32 f16 bf16 q8_0 q4_0 q4_k q5_k q6_k)
if ((quick)); then
  # name:dim:ffn:layers:heads:kv_heads:context
  shapes=("tiny:256:768:2:4:4:1024")
  bench_args=(-p 32 -n 8 -r 1 --probe-mb 32)  # the first shape's, with batched decode
  batches=1,4
  large_args=()                                 # the other shapes': no batched decode
  streams=(1 4)
  load_args=(--prompt-tokens 32 --max-tokens 8)
  requests_per_stream=2
  prefix_args=(--requests 4 --prompt-tokens 128 --max-tokens 4)
  prefix_tokens=96
  depth_args=(-p 0 -n 8 -d 0,64,256 -b none -r 1 --probe-mb 32)
else
  shapes=("110M:768:2048:12:12:12:4096" "1.1B:2048:5632:22:32:4:2048")
  bench_args=(-p 512 -n 64 -r 3)
  batches=1,64
  large_args=(-p 512 -n 32 -r 3 -b none)
  streams=(1 4 16 64)
  load_args=(--prompt-tokens 128 --max-tokens 64)
  requests_per_stream=4
  prefix_args=(--requests 16 --prompt-tokens 512 --max-tokens 8)
  prefix_tokens=448
  depth_args=(-p 0 -n 64 -d 0,100,250,500,1000,2000,3000,4000 -b none -r 3)
fi

models="${LOOM_BENCH_MODELS:-$HOME/.cache/loom/bench-models}"
mkdir -p "$models"
rm -rf "$out"
mkdir -p "$out/json"
started=$SECONDS
# The tools' own progress and messages go to a log, shown when a step fails.
log="$out/log.txt"
trap 'echo "report.sh: a step failed; the last lines of $log:" >&2; tail -n 20 "$log" >&2' ERR

# synth SHAPE TYPE: the model's path, written unless a previous --keep-models run left it.
synth() {
  local name dim ffn layers heads kv context
  IFS=: read -r name dim ffn layers heads kv context <<< "$1"
  local path="$models/$name-$2.gguf"
  if [[ ! -f "$path" ]]; then
    say "writing $path"
    "$bin/loom" synth --out "$path.part" --dim "$dim" --ffn "$ffn" --layers "$layers" --heads "$heads" \
      --kv-heads "$kv" --context "$context" --type "$2" --vocab-from "$vocab" > /dev/null 2>> "$log"
    mv "$path.part" "$path"
  fi
  echo "$path"
}

# 1. Every type on every shape: prefill and single-stream decode (batched decode on the first shape).
for shape in "${shapes[@]}"; do
  name=${shape%%:*}
  for type in "${types[@]}"; do
    model=$(synth "$shape" "$type")
    args=(-b "$batches" "${bench_args[@]}")
    [[ "$shape" == "${shapes[0]}" ]] || args=("${large_args[@]}")
    say "[$((SECONDS - started)) s] loom bench $name $type"
    "$bin/loom" bench --model "$model" "${args[@]}" -t "$threads" --json 2>> "$log" > "$out/json/bench-$name-$type.json"
    ((keep_models)) || [[ "$type" == q8_0 && "$shape" == "${shapes[0]}" ]] || rm -f "$model"
  done
done

# 2. Decode against context length, on the first shape in Q8_0.
served=$(synth "${shapes[0]}" q8_0)
say "[$((SECONDS - started)) s] decode vs context"
"$bin/loom" bench --model "$served" "${depth_args[@]}" -t "$threads" --json 2>> "$log" > "$out/json/depth.json"

# 3. The gateway on the same model, loaded by loom-loadgen over OpenAI HTTP/SSE.
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$bin/loom-gateway" --model "$served" --host 127.0.0.1 --port "$port" --compute-threads "$threads" \
  > "$out/gateway.log" 2>&1 &
gateway=$!
trap 'kill $gateway 2> /dev/null || true' EXIT
for _ in $(seq 1 600); do
  grep -q "ready to serve" "$out/gateway.log" && break
  kill -0 $gateway 2> /dev/null || { cat "$out/gateway.log" >&2; echo "report.sh: the gateway exited" >&2; exit 1; }
  sleep 0.1
done
grep -q "ready to serve" "$out/gateway.log" || { echo "report.sh: the gateway did not start in 60 s" >&2; exit 1; }
url="http://127.0.0.1:$port"

# metric NAME: a counter's value from /metrics.
metric() {
  python3 - "$url/metrics" "$1" << 'EOF'
import sys, urllib.request
text = urllib.request.urlopen(sys.argv[1], timeout=10).read().decode()
print(next((line.split()[-1] for line in text.splitlines() if line.split(" ")[0] == sys.argv[2]), "0"))
EOF
}

for n in "${streams[@]}"; do
  say "[$((SECONDS - started)) s] $n concurrent streams"
  before=$(metric loom_scheduler_preemptions_total)
  "$bin/loom-loadgen" --url "$url" --concurrency "$n" --requests $((n * requests_per_stream > 8 ? n * requests_per_stream : 8)) \
    "${load_args[@]}" --quiet --json > "$out/json/load-c$n.json"
  after=$(metric loom_scheduler_preemptions_total)
  python3 - "$out/json/load-c$n.json" "$before" "$after" << 'EOF'
import json, sys
path, before, after = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
report = json.load(open(path))
report["server_preemptions"] = int(after - before)
json.dump(report, open(path, "w"), indent=1)
EOF
done

# 4. Time to first token with and without a cached prefix (one stream, so each request sees the cache).
say "[$((SECONDS - started)) s] time to first token with and without a cached prefix"
"$bin/loom-loadgen" --url "$url" --concurrency 1 "${prefix_args[@]}" --seed 11 --quiet --json > "$out/json/prefix-none.json"
"$bin/loom-loadgen" --url "$url" --concurrency 1 "${prefix_args[@]}" --seed 12 --shared-prefix-tokens "$prefix_tokens" \
  --quiet --json > "$out/json/prefix-shared.json"
kill $gateway
wait $gateway 2> /dev/null || true
trap - EXIT
((keep_models)) || rm -f "$served"

# 5. Tables and plots.
command=("bench/report.sh")
((quick)) && command+=(--quick)
python3 - "$out/json/meta.json" "$threads" "${command[*]}" "$root" << 'EOF'
import datetime, json, platform, subprocess, sys
path, threads, command, root = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
commit = subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
dirty = subprocess.run(["git", "-C", root, "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True).stdout.strip()
cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), platform.processor())
json.dump({"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
           "commit": commit + (" (with uncommitted changes)" if dirty else ""), "cpu": cpu, "threads": threads,
           "command": command, "load_average": open("/proc/loadavg").read().split()[:3]}, open(path, "w"), indent=1)
EOF
say "[$((SECONDS - started)) s] tables and plots"
python3 "$root/bench/report/tables.py" "$out"
(cd "$out" && gnuplot "$root/bench/report/plots.gp")
rm -f "$out"/*.dat
say "done in $((SECONDS - started)) s: $out/report.md"
