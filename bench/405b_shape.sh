#!/usr/bin/env bash
# The 405B shape on 8 CPU ranks (issue 7): writes the one-layer FP8 checkpoint with Llama 3.1
# 405B's exact shapes if it is not there (~12 GB, a few minutes), builds the programs, then
# loads it on 8 ranks, compares each rank's weight bytes with the planner's per-rank figure and
# streams tokens through the public API. Not a CI test: it needs ~14 GB of disk and ~15 GB of
# memory and takes minutes.
#   bash bench/405b_shape.sh [DIR]     (default /tmp/tpserve-405b-shape)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bazel_cache.sh  # the disk cache every script shares
dir="${1:-/tmp/tpserve-405b-shape}"
echo "date: $(date -u +%Y-%m-%dT%H:%MZ)  cpu: $(lscpu | sed -n 's/^Model name: *//p')  cores: $(nproc)  memory: $(free -g | awk '/Mem:/{print $2}') GiB"
if [ ! -f "$dir/model.safetensors.index.json" ]; then
  python3 bench/make_405b_shape.py --out "$dir" --tokenizer
elif [ ! -f "$dir/tokenizer.json" ]; then
  python3 bench/make_405b_shape.py --out "$dir" --tokenizer_only
fi
bazel build -c opt --symlink_prefix=/ //deploy:launch //deploy:vram //worker:worker >&2
bin="$(bazel info -c opt bazel-bin 2>/dev/null)"
python3 bench/405b_shape.py --model "$dir" --bin_dir "$bin"
