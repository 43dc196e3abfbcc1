#!/usr/bin/env bash
# docs/PERFORMANCE.md's "Model families (issue 35)" figures: batch-1 prefill and decode of
# tpserve (//bench:model_bench) and llama.cpp (bench/llama_cpp_bench.py) on the same GGUF files,
# thread counts, KV dtype (f16) and prompt, interleaved A B A B: each round runs tpserve and then
# llama.cpp once per model, each the better of 2 runs inside (the first of a process is a warm-up:
# llama.cpp's first decode of Gemma 3 ran at 0.9 tok/s), and the summary gives the best and the
# median of the rounds. Before each run it waits (polling every 20 s, at most --max_wait
# seconds) for the 1-minute load average to fall below --quiet, and prints the load it started at.
#   bash bench/families/run_family_bench.sh [--rounds=3] [--threads=1,2] [--prompt_tokens=512]
#       [--decode_tokens=64] [--quiet=0.6] [--max_wait=300] [MODEL.gguf ...]
# Models default to Gemma 3 270M Q4_K_M and the Qwen2.5-0.5B-shaped Q4_K_M that
# bench/make_qwen_shaped_gguf.py writes. PYTHON (default python3) must import llama_cpp.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/bazel_cache.sh
rounds=3; threads=1,2; prompt=512; decode=64; quiet=0.6; max_wait=300; models=()
for arg in "$@"; do
  case "$arg" in
    --rounds=*) rounds="${arg#*=}" ;;
    --threads=*) threads="${arg#*=}" ;;
    --prompt_tokens=*) prompt="${arg#*=}" ;;
    --decode_tokens=*) decode="${arg#*=}" ;;
    --quiet=*) quiet="${arg#*=}" ;;
    --max_wait=*) max_wait="${arg#*=}" ;;
    --*) echo "unknown argument $arg" >&2; exit 2 ;;
    *) models+=("$arg") ;;
  esac
done
dir="${TPSERVE_MODEL_DIR:-$HOME/.cache/tpserve}"
[ ${#models[@]} -gt 0 ] ||
  models=("$dir/gemma-3-270m-q4_k_m.gguf" "$dir/qwen2.5-0.5b-shaped-q4_k_m.gguf")
python="${PYTHON:-python3}"
bazel build -c opt --symlink_prefix=/ //bench:model_bench >&2
bin="$(bazel info -c opt bazel-bin 2>/dev/null)/bench/model_bench"
log="$(mktemp)"

wait_quiet() {
  local waited=0
  while awk -v q="$quiet" '{exit !($1 >= q)}' /proc/loadavg && [ "$waited" -lt "$max_wait" ]; do
    sleep 20; waited=$((waited + 20))
  done
  echo "load $(cut -d' ' -f1-3 /proc/loadavg) after waiting ${waited}s"
}

echo "date: $(date -u +%Y-%m-%dT%H:%MZ)  cpu: $(lscpu | sed -n 's/^Model name: *//p')" \
  " cores: $(nproc)  load: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq 1 "$rounds"); do
  for m in "${models[@]}"; do
    name="$(basename "$m" .gguf)"
    echo "round $r $name tpserve: $(wait_quiet)"
    "$bin" --model="$m" --threads="$threads" --prompt_tokens="$prompt" \
      --decode_tokens="$decode" --kv_dtype=f16 --repeats=2 --stream_mib=0 |
      sed "s/^/$name round=$r /" | tee -a "$log"
    echo "round $r $name llama.cpp: $(wait_quiet)"
    "$python" bench/llama_cpp_bench.py --model "$m" --threads "$threads" \
      --prompt_tokens "$prompt" --decode_tokens "$decode" --kv_dtype f16 --repeats 2 |
      sed "s/^/$name round=$r /" | tee -a "$log"
  done
done
echo "date: $(date -u +%Y-%m-%dT%H:%MZ)  load: $(cut -d' ' -f1-3 /proc/loadavg)"
# Best and median over the rounds, per model, thread count and engine; ratio tpserve / llama.cpp.
"$python" - "$log" <<'EOF'
import re, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    m = re.match(r"(\S+) round=\d+ (tpserve|llama\.cpp) .*threads=(\d+) .*prefill_tok_s=([\d.]+) "
                 r"decode_tok_s=([\d.]+)", line)
    if m:
        rows.setdefault((m[1], int(m[3]), m[2]), []).append((float(m[4]), float(m[5])))
print("| model | threads | tpserve prefill tok/s best / median | llama.cpp prefill "
      "| ratio (median) "
      "| tpserve decode tok/s best / median | llama.cpp decode | ratio (median) |")
print("|---|---|---|---|---|---|---|---|")
for model, threads in sorted({(k[0], k[1]) for k in rows}):
    ours = rows.get((model, threads, "tpserve"), [])
    theirs = rows.get((model, threads, "llama.cpp"), [])
    if not ours or not theirs:
        continue
    cells = []
    for i in range(2):
        a = [x[i] for x in ours]; b = [x[i] for x in theirs]
        cells += [f"{max(a):.1f} / {statistics.median(a):.1f}",
                  f"{max(b):.1f} / {statistics.median(b):.1f}",
                  f"{statistics.median(a) / statistics.median(b):.2f}x"]
    print(f"| {model} | {threads} | " + " | ".join(cells) + f" |  (n={len(ours)}/{len(theirs)})")
EOF
rm -f "$log"
