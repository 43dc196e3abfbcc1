#!/usr/bin/env bash
# The same load against a tpserve cluster and against llama.cpp, one concurrency level after
# another, then both side by side. tpserve: //deploy:launch with --max_seqs >= the highest level,
# driven by //deploy:loadgen through the public gRPC API. llama.cpp: bench/llama_cpp_loadgen.py
# (llama-cpp-python, continuous batching over as many sequences). Same workload, seed, threads.
#
#   bash bench/run_loadgen.sh                  # levels 1,8,16; 16 requests each; 200 -> 64 tokens
#   bash bench/run_loadgen.sh --levels=1,4 --requests=8 --output_tokens=32 --out_dir=/tmp/lg
#
# Flags: --levels=1,8,16 --requests=16 --prompt_tokens=200 --output_tokens=64 (mixes like
# 64:0.5,512:0.5 work) --rate=0 (closed loop) --threads=$(nproc) --ranks=1 --context=1024
# --slo_ttft_ms=2000 --slo_itl_ms=200 --seed=1 --model=PATH --out_dir=DIR (JSON per run + summary.md)
# --launch_flag=FLAG (repeatable; e.g. --launch_flag=--prefix_caching=false).
# Every level sends the same requests (one seed) to one tpserve cluster, so from the second level
# on tpserve finds their prompts in its prefix cache, while the peer starts a fresh process per
# level: --launch_flag=--prefix_caching=false compares prefill on both sides.
# Exits non-zero if a run failed a request or could not run; the other runs still happen.
set -euo pipefail
cd "$(dirname "$0")/.."
levels=1,8,16; requests=16; prompt=200; output=64; rate=0; threads=$(nproc); ranks=1
context=1024; slo_ttft=2000; slo_itl=200; seed=1
model="${TPSERVE_MODEL_DIR:-$HOME/.cache/tpserve}/SmolLM2-135M-Instruct.Q4_1.gguf"
out_dir=""
launch_flags=()
for arg in "$@"; do
  case "$arg" in
    --levels=*) levels="${arg#*=}" ;;
    --requests=*) requests="${arg#*=}" ;;
    --prompt_tokens=*) prompt="${arg#*=}" ;;
    --output_tokens=*) output="${arg#*=}" ;;
    --rate=*) rate="${arg#*=}" ;;
    --threads=*) threads="${arg#*=}" ;;
    --ranks=*) ranks="${arg#*=}" ;;
    --context=*) context="${arg#*=}" ;;
    --slo_ttft_ms=*) slo_ttft="${arg#*=}" ;;
    --slo_itl_ms=*) slo_itl="${arg#*=}" ;;
    --seed=*) seed="${arg#*=}" ;;
    --model=*) model="${arg#*=}" ;;
    --out_dir=*) out_dir="${arg#*=}" ;;
    --launch_flag=*) launch_flags+=("${arg#*=}") ;;
    *) echo "run_loadgen: unknown argument $arg" >&2; exit 2 ;;
  esac
done
[ -f "$model" ] || { echo "run_loadgen: $model is missing: run scripts/setup.sh" >&2; exit 2; }
[ -n "$out_dir" ] || out_dir=$(mktemp -d /tmp/tpserve-loadgen.XXXXXX)
mkdir -p "$out_dir"
max_level=$(tr ',' '\n' <<<"$levels" | sort -n | tail -1)
common=(--requests="$requests" --prompt_tokens="$prompt" --output_tokens="$output" --rate="$rate"
        --slo_ttft_ms="$slo_ttft" --slo_itl_ms="$slo_itl" --seed="$seed")

echo "date: $(date -u +%Y-%m-%dT%H:%MZ)  cpu: $(lscpu | sed -n 's/^Model name: *//p')  cores: $(nproc)  load: $(cut -d" " -f1-3 /proc/loadavg)"
echo "model: $model  threads: $threads  tpserve ranks: $ranks  levels: $levels  out: $out_dir"

startup=()
[ -n "${TPSERVE_BAZEL_OUTPUT_BASE:-}" ] && startup=(--output_base="$TPSERVE_BAZEL_OUTPUT_BASE")
bazel "${startup[@]}" build -c opt //deploy:launch //deploy:loadgen //worker:worker >&2
bin="$(bazel "${startup[@]}" info -c opt bazel-bin 2>/dev/null)"

status=0
launcher=""
stop_launcher() {
  if [ -n "$launcher" ] && kill -0 "$launcher" 2>/dev/null; then
    kill -TERM "$launcher"
    wait "$launcher" || true
  fi
  launcher=""
}
trap stop_launcher EXIT

# tpserve: one cluster serves every level.
ready="$out_dir/ready"
rm -f "$ready"
TPSERVE_WORKER_BIN="$bin/worker/worker" "$bin/deploy/launch" --ranks="$ranks" --model="$model" \
  --port=0 --http_port=0 --ready_file="$ready" --max_seqs="$max_level" --context="$context" \
  --threads_per_rank="$threads" "${launch_flags[@]}" >"$out_dir/launch.log" 2>&1 &
launcher=$!
for _ in $(seq 1 1800); do
  [ -f "$ready" ] && break
  kill -0 "$launcher" 2>/dev/null || { echo "run_loadgen: launcher exited:" >&2; cat "$out_dir/launch.log" >&2; exit 1; }
  sleep 0.1
done
[ -f "$ready" ] || { echo "run_loadgen: cluster not ready in 180 s" >&2; exit 1; }
address=$(head -n 1 "$ready")  # line 1: the gRPC address
for c in ${levels//,/ }; do
  echo
  "$bin/deploy/loadgen" --address="$address" --concurrency="$c" "${common[@]}" \
    --json_out="$out_dir/tpserve_c$c.json" || { echo "run_loadgen: tpserve at concurrency $c failed" >&2; status=1; }
done
stop_launcher
tail -1 "$out_dir/launch.log"

# llama.cpp: the same settings, one process per level (its context holds that many sequences).
for c in ${levels//,/ }; do
  echo
  python3 bench/llama_cpp_loadgen.py --model="$model" --concurrency="$c" --threads="$threads" \
    "${common[@]}" --json_out="$out_dir/llama_cpp_c$c.json" ||
    { echo "run_loadgen: llama.cpp at concurrency $c failed" >&2; status=1; }
done

echo
jsons=()
for c in ${levels//,/ }; do
  for f in "$out_dir/tpserve_c$c.json" "$out_dir/llama_cpp_c$c.json"; do [ -f "$f" ] && jsons+=("$f"); done
done
python3 bench/compare_loadgen.py "${jsons[@]}" | tee "$out_dir/summary.md"
echo "JSON: $out_dir"
exit "$status"
