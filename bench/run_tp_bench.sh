#!/usr/bin/env bash
# Tensor-parallel decode benchmark through the public API: SmolLM2 at 1 and 3 ranks, a
# synthetic Llama (bench/make_synthetic_gguf.py) at 1, 2 and 3; each degree with the cores
# split between ranks (TP=N at 2/N threads, at least 1) against one rank with both cores.
#   bash bench/run_tp_bench.sh [extra launch flags, e.g. --comm=gloo or --deterministic_tp]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bazel_cache.sh  # the disk cache every script shares
bazel build -c opt //deploy:launch //worker:worker
model_dir="${TPSERVE_MODEL_DIR:-$HOME/.cache/tpserve}"
synthetic="$model_dir/synthetic-tp-bench.Q4_1.gguf"
[ -f "$synthetic" ] && python3 -c "import sys; from gguf import GGUFReader; sys.exit(GGUFReader(sys.argv[1]).fields['llama.embedding_length'].parts[-1][0] != 1152)" "$synthetic" || python3 bench/make_synthetic_gguf.py "$synthetic"
lscpu | grep "Model name"; date -u
python3 bench/cluster_bench.py "$model_dir/SmolLM2-135M-Instruct.Q4_1.gguf" 1 3 -- "$@"
python3 bench/cluster_bench.py "$synthetic" 1 2 3 -- "$@"
