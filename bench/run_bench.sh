#!/usr/bin/env bash
# Runs the tpserve and llama.cpp benchmarks back to back on the same model and settings and
# prints the machine, so the figures can go into docs/PERFORMANCE.md as they are.
#   bash bench/run_bench.sh [--threads=1,2] [--prompt_tokens=512] [--decode_tokens=64] [--kv_dtype=f16]
#       [--model=FILE.gguf]   (default: the bundled SmolLM2 Q4_1, as both benches default to)
# model_bench also prints the DRAM ceiling of the same run (a streaming read) beside decode.
set -euo pipefail
cd "$(dirname "$0")/.."
threads=1,2; prompt=512; decode=64; kv=f16; model_args=()
for arg in "$@"; do
  case "$arg" in
    --threads=*) threads="${arg#*=}" ;;
    --prompt_tokens=*) prompt="${arg#*=}" ;;
    --decode_tokens=*) decode="${arg#*=}" ;;
    --kv_dtype=*) kv="${arg#*=}" ;;
    --model=*) model_args=(--model="${arg#*=}") ;;
    *) echo "unknown argument $arg" >&2; exit 2 ;;
  esac
done
echo "date: $(date -u +%Y-%m-%dT%H:%MZ)  cpu: $(lscpu | sed -n 's/^Model name: *//p')  cores: $(nproc)  load: $(cut -d" " -f1-3 /proc/loadavg)"
# An optimised build; TPSERVE_BAZEL_OUTPUT_BASE keeps it apart from the test builds if wanted.
startup=()
[ -n "${TPSERVE_BAZEL_OUTPUT_BASE:-}" ] && startup=(--output_base="$TPSERVE_BAZEL_OUTPUT_BASE")
bazel "${startup[@]}" build -c opt --symlink_prefix=/ //bench:model_bench >&2
"$(bazel "${startup[@]}" info -c opt bazel-bin 2>/dev/null)/bench/model_bench" --threads="$threads" --prompt_tokens="$prompt" --decode_tokens="$decode" --kv_dtype="$kv" \
  ${model_args[@]+"${model_args[@]}"}
python3 bench/llama_cpp_bench.py --threads "$threads" --prompt_tokens "$prompt" --decode_tokens "$decode" --kv_dtype "$kv" \
  ${model_args[@]+"${model_args[@]}"}
