#!/bin/bash
# The CUDA backend's device check, run on the GPU machine from the folder stage_device_run.sh
# filled: the device, the parity suite (every case, full table in $OUT/parity.txt, failures and
# the summary on stdout), then the benchmark ($OUT/bench.txt). Exit status: the parity suite's
# (0 all passed, 1 a case failed, 2 no usable device).
#
#   bash .devrun-cuda/device_check.sh            # OUT defaults to /tmp
#   PARITY_FILTER=PagedAttention bash .devrun-cuda/device_check.sh
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp}
cublas=$(ls /usr/local/cuda/lib64/libcublasLt.so.13 2>/dev/null ||
         find /usr/local /opt /usr/lib -name libcublasLt.so.13 2>/dev/null | head -n 1)
cudart=$(ls /usr/local/cuda/lib64/libcudart.so.13 2>/dev/null ||
         find /usr/local /opt /usr/lib -name libcudart.so.13 2>/dev/null | head -n 1)
echo "libcublasLt: ${cublas:-NOT FOUND}; libcudart: ${cudart:-NOT FOUND}"
export LD_LIBRARY_PATH="$here/lib:$(dirname "${cublas:-/x/x}"):$(dirname "${cudart:-/x/x}"):${LD_LIBRARY_PATH:-}"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv
echo "== parity (CUDA bf16 vs CPU scalar f32), table in $out/parity.txt"
TPSERVE_CUDA_CHECK=1 timeout "${PARITY_TIMEOUT:-300}" "$here/cuda_parity" --failures_only \
  --table="$out/parity.txt" ${PARITY_FILTER:+--filter=$PARITY_FILTER}
parity=$?
echo "== parity exit status $parity"
if [ "${SKIP_BENCH:-0}" != 1 ]; then
  echo "== bench (copy ceiling, fp8 GEMV, 2048-row GEMMs, 8B decode step eager and as a graph)"
  TPSERVE_CUDA_GRAPHS=1 timeout "${BENCH_TIMEOUT:-300}" "$here/cuda_bench" 2>&1 |
    tee "$out/bench.txt"
  echo "== bench exit status ${PIPESTATUS[0]}"
fi
exit $parity
