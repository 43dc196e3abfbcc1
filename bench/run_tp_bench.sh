#!/usr/bin/env bash
# Tensor-parallel decode benchmark: SmolLM2 at 1 and 3 ranks, a synthetic Llama at 1, 2, 4.
set -euo pipefail
cd "$(dirname "$0")/.."
bazel build //deploy:launch //worker:worker
model_dir="${TPSERVE_MODEL_DIR:-$HOME/.cache/tpserve}"
synthetic="$model_dir/synthetic-tp-bench.Q4_1.gguf"
[ -f "$synthetic" ] || python3 bench/make_synthetic_gguf.py "$synthetic"
lscpu | grep "Model name"; date -u
python3 bench/cluster_bench.py "$model_dir/SmolLM2-135M-Instruct.Q4_1.gguf" 1 3
python3 bench/cluster_bench.py "$synthetic" 1 2 4
