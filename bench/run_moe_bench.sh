#!/usr/bin/env bash
# docs/PERFORMANCE.md's "Mixtures of experts" figures for one CPU rank beside llama.cpp, on the
# Qwen3-30B-A3B-shaped GGUFs that bench/make_qwen3moe_shaped_gguf.py writes (made here if
# missing), in four parts, each printing its own table:
#   1. same model? bench/families/greedy_check.py (tpserve's and llama.cpp's greedy ids and
#      first logits on the same file and random prompts, seeds 0 1 2);
#   2. one sequence: //bench:model_bench and bench/llama_cpp_bench.py on each file, interleaved
#      A B A B for --rounds rounds (each engine the better of 2 runs in its process), each run
#      after waiting up to --max_wait s for the 1-minute load to fall below --quiet; summed up
#      by bench/moe_bench_summary.py: wall tok/s and CPU ms per token, both engines;
#   3. where tpserve's decode step goes: //bench:model_bench --profile (CpuOpProfile);
#   4. concurrent sequences: bench/run_loadgen.sh (//deploy:launch + //deploy:loadgen against
#      bench/llama_cpp_loadgen.py, the same requests) at --levels.
#   bash bench/run_moe_bench.sh [--ftypes=q8_0,q4_k_m] [--threads=1,2] [--rounds=3]
#       [--levels=1,4] [--requests=8] [--prompt_tokens=32] [--output_tokens=64] [--parts=1,2,3,4]
#       [--quiet=1.0] [--max_wait=120]
# PYTHON (default ~/.cache/tpserve/venv-structured/bin/python) must import numpy, gguf and
# llama_cpp; bench/structured_venv.sh makes that venv.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bazel_cache.sh
ftypes=q8_0,q4_k_m; threads=1,2; rounds=3; levels=1,4; requests=8; prompt=32; output=64
parts=1,2,3,4; quiet=1.0; max_wait=120
for arg in "$@"; do
  case "$arg" in
    --ftypes=*) ftypes="${arg#*=}" ;;
    --threads=*) threads="${arg#*=}" ;;
    --rounds=*) rounds="${arg#*=}" ;;
    --levels=*) levels="${arg#*=}" ;;
    --requests=*) requests="${arg#*=}" ;;
    --prompt_tokens=*) prompt="${arg#*=}" ;;
    --output_tokens=*) output="${arg#*=}" ;;
    --parts=*) parts="${arg#*=}" ;;
    --quiet=*) quiet="${arg#*=}" ;;
    --max_wait=*) max_wait="${arg#*=}" ;;
    *) echo "run_moe_bench: unknown argument $arg" >&2; exit 2 ;;
  esac
done
top="${threads##*,}"  # parts 1, 3 and 4 run at the last thread count only
python="${PYTHON:-$HOME/.cache/tpserve/venv-structured/bin/python}"
dir="${TPSERVE_MODEL_DIR:-$HOME/.cache/tpserve}"
bazel build -c opt --symlink_prefix=/ //bench:model_bench //bench/families:greedy_ids >&2
bin="$(bazel info -c opt bazel-bin 2>/dev/null)"
models=()
for f in ${ftypes//,/ }; do
  m="$dir/qwen3-30b-a3b-shaped-4l-$f.gguf"
  [ -f "$m" ] || "$python" bench/make_qwen3moe_shaped_gguf.py --ftype "$f" --out "$m" >&2
  models+=("$m")
done
echo "date: $(date -u +%Y-%m-%dT%H:%MZ)  commit: $(git rev-parse --short HEAD)  cpu: $(lscpu | sed -n 's/^Model name: *//p')  cores: $(nproc)  load: $(cut -d' ' -f1-3 /proc/loadavg)"
has() { [[ ",$parts," == *",$1,"* ]]; }
# Waits (polling every 20 s, at most --max_wait seconds) for the 1-minute load to fall below
# --quiet; prints the load it started at.
wait_quiet() {
  local waited=0
  while awk -v q="$quiet" '{exit !($1 >= q)}' /proc/loadavg && [ "$waited" -lt "$max_wait" ]; do
    sleep 20; waited=$((waited + 20))
  done
  echo "load $(cut -d' ' -f1-3 /proc/loadavg) after waiting ${waited}s"
}
if has 1; then
  for m in "${models[@]}"; do
    for seed in 0 1 2; do
      "$python" bench/families/greedy_check.py --greedy_ids "$bin/bench/families/greedy_ids" \
        --model "$m" --seed "$seed" --threads "$top" --min_agree 0 | grep -E "^(model|tpserve|llama|logits|leading)"
    done
  done
fi
if has 2; then
  log="$(mktemp)"
  for r in $(seq 1 "$rounds"); do
    for m in "${models[@]}"; do
      name="$(basename "$m" .gguf)"
      echo "round $r $name tpserve: $(wait_quiet)"
      "$bin/bench/model_bench" --model="$m" --threads="$threads" --prompt_tokens=256 \
        --decode_tokens=64 --kv_dtype=f16 --repeats=2 --stream_mib=0 |
        sed "s/^/$name round=$r /" | tee -a "$log"
      echo "round $r $name llama.cpp: $(wait_quiet)"
      "$python" bench/llama_cpp_bench.py --model "$m" --threads "$threads" --prompt_tokens 256 \
        --decode_tokens 64 --kv_dtype f16 --repeats 2 | sed "s/^/$name round=$r /" | tee -a "$log"
    done
  done
  "$python" bench/moe_bench_summary.py "$log"
  rm -f "$log"
fi
if has 3; then
  for m in "${models[@]}"; do
    echo "profile $(basename "$m"), load $(cut -d' ' -f1-3 /proc/loadavg):"
    "$bin/bench/model_bench" --model="$m" --threads="$top" --prompt_tokens=256 \
      --decode_tokens=64 --repeats=2 --stream_mib=1024 --profile
  done
fi
if has 4; then
  for m in "${models[@]}"; do
    PATH="$(dirname "$python"):$PATH" bash bench/run_loadgen.sh --model="$m" --levels="$levels" \
      --requests="$requests" --prompt_tokens="$prompt" --output_tokens="$output" \
      --threads="$top" --context=1024 --launch_flag=--prefix_caching=false
  done
fi
