#!/usr/bin/env bash
# docs/PERFORMANCE.md's expert-parallel figures: bench/moe_ep_bench.py over the Qwen3-30B-A3B-
# shaped Q8_0 GGUF (bench/make_qwen3moe_shaped_gguf.py; made here if missing) at 1, 2 and 4 CPU
# ranks, experts split by tensor parallelism (the default) against --expert_parallel, decode at 1
# and 4 streams and a prefill. Q8_0 because the Q4_K_M file's expert_down (768 columns) cannot
# be split at TP 2 or 4 (Q4_K blocks of 256): the launcher refuses it, and only
# --expert_parallel (whole experts) runs it; --model=FILE --layouts=ep measures that.
#   bash bench/run_moe_ep_bench.sh [--model=FILE] [moe_ep_bench.py flags] [-- launch flags]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bazel_cache.sh
python="${PYTHON:-$HOME/.cache/tpserve/venv-structured/bin/python}"
model="${TPSERVE_MODEL_DIR:-$HOME/.cache/tpserve}/qwen3-30b-a3b-shaped-4l-q8_0.gguf"
args=()
for arg in "$@"; do
  case "$arg" in
    --model=*) model="${arg#*=}" ;;
    *) args+=("$arg") ;;
  esac
done
bazel build -c opt //deploy:launch //worker:worker >&2
[ -f "$model" ] || "$python" bench/make_qwen3moe_shaped_gguf.py --ftype q8_0 --out "$model" >&2
echo "date: $(date -u +%Y-%m-%dT%H:%MZ)  commit: $(git rev-parse --short HEAD)  cpu: $(lscpu | sed -n 's/^Model name: *//p')  cores: $(nproc)"
TPSERVE_BIN_DIR="$(bazel info -c opt bazel-bin 2>/dev/null)" "$python" bench/moe_ep_bench.py "$model" "${args[@]}"
