#!/usr/bin/env bash
# oneDNN's matmul beside ours on the same shapes, threads and run (issue 39's library comparison,
# docs/PERFORMANCE.md "oneDNN and tinyBLAS, measured"). The probe is a manual target, built
# only here.
#   bash bench/onednn_matmul_probe.sh [--shapes=576x1536,16384x4096] [--tokens=1,2,4,5,8,16]
#                                     [--layouts=fixed,prepacked,plain] [--threads=2]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bazel_cache.sh  # the disk cache every script shares
shapes=576x1536,1536x576,16384x4096; tokens=1,2,4,5,8,16; layouts=fixed; threads=2
for arg in "$@"; do
  case "$arg" in
    --shapes=*) shapes="${arg#*=}" ;;
    --tokens=*) tokens="${arg#*=}" ;;
    --layouts=*) layouts="${arg#*=}" ;;
    --threads=*) threads="${arg#*=}" ;;
    *) echo "unknown argument $arg" >&2; exit 2 ;;
  esac
done
bash scripts/setup.sh >&2  # libdnnl-dev among the rest; does nothing that is already done
bazel build -c opt --symlink_prefix=/ //bench:onednn_matmul_probe //kernels/cpu:matmul_bench >&2
bin="$(bazel info -c opt bazel-bin 2>/dev/null)"
echo "date: $(date -u +%Y-%m-%dT%H:%MZ)  cpu: $(lscpu | sed -n 's/^Model name: *//p')  cores: $(nproc)  load: $(cut -d' ' -f1-3 /proc/loadavg)"
for layout in ${layouts//,/ }; do
  OMP_NUM_THREADS="$threads" "$bin/bench/onednn_matmul_probe" --shapes="$shapes" \
    --tokens="$tokens" --formats=bf16,f32 --layout="$layout"
done
"$bin/kernels/cpu/matmul_bench" --formats=bf16,f32 --shapes="$shapes" --threads="$threads" \
  --tokens="$tokens"
