#!/usr/bin/env bash
# The GPU checks, as ONE command on the device machine (no bazel, no network there):
#
#   bash tests/gpu/device_checks.sh "$OUT"      # with gpu-bundle/ carried (build_bundle.sh)
#
# Steps, each under `timeout`, none stopping the others: the environment (nvidia-smi, driver,
# libraries), the NCCL communicator test, the CUDA backend parity test (MLA's ops included), the
# deterministic mode's bit-equality tests (matmuls, attention), the MoE ops against the CPU, the
# GPU benchmark in FP8 and in BF16, the CUDA kernels against the GPU's ceilings (cuda_bench), and
# a CUDA smoke test built with the machine's own nvcc. Everything is tee'd to
# $OUT/device_checks.log; $OUT/summary.json has each step's status (ok / failed / skipped),
# seconds and key figures; the benchmarks' own JSON lands in $OUT/bench_*.json.
# The last line is "device_checks: N passed, M failed". Exit status 1 if any step failed.
# A binary that cannot start (a missing library, a too-old glibc) gets its ldd printed.
# Without a GPU (the build machine) the steps report a clean skip. Budget: the steps share
# DEVICE_CHECKS_BUDGET_S (330 s) and each has its own cap; expected total about 2 minutes.
set -uo pipefail

main() {
  OUT_DIR="$1"
  ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
  BUNDLE="${GPU_BUNDLE:-$ROOT/gpu-bundle}"
  BUDGET_S="${DEVICE_CHECKS_BUDGET_S:-330}"
  WORK="$(mktemp -d /tmp/device_checks.XXXXXX)"
  START=$(date +%s)
  STEPS="$WORK/steps.tsv"
  : > "$STEPS"
  echo "device_checks: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname), bundle $BUNDLE"
  [[ -f "$BUNDLE/MANIFEST.txt" ]] && sed -n '1,5p' "$BUNDLE/MANIFEST.txt"

  step_environment
  setup_libraries
  unpack_binaries
  run_gtest nccl_communicator_test 90
  run_gtest device_wait_test 30
  # TPSERVE_CUDA_CHECK=1: the CUDA backend checks every op at once, so a fault names its op.
  # Besides the suite: multi-head latent attention (DeepSeek-V3), RopePart and PagedAttention
  # over a bf16 / e4m3 latent pool on FlashInfer's MLA kernel (CudaParity.Mla*; a few seconds,
  # skipped with a line saying why where the GPU is not compute capability 9.0).
  run_gtest cuda_parity_test 150 TPSERVE_CUDA_CHECK=1
  # Deterministic mode: GEMM rows and attention rows the same bits in any batch and TP slice.
  run_gtest cuda_deterministic_test 60
  # CUTLASS's mixed-input GEMM alone: against its host emulation and the CPU reference, chunked
  # == chunk by chunk, batch-independent decode rows, device == host preparation.
  run_gtest mixed_gemm_gpu_test 60
  run_gtest attention_invariance_test 30
  # The families' attention (issue 35): plain, sliding-window and soft-capped layers in one step,
  # head_dim 128 and 256, against an f64 host reference.
  run_gtest attention_layers_test 30
  # Mixtures of experts (issue 36): routing, the grouping kernels and MoeExperts against the CPU
  # backend in bf16, fp8 and int4; expert parallelism's halves bit for bit.
  run_gtest cuda_moe_test 60 TPSERVE_CUDA_CHECK=1
  run_bench fp8 150
  run_bench bf16 90
  run_kernel_bench 60
  run_smoke 60

  local passed failed skipped
  passed=$(awk -F'\t' '$2 == "ok"' "$STEPS" | wc -l)
  failed=$(awk -F'\t' '$2 == "failed"' "$STEPS" | wc -l)
  skipped=$(awk -F'\t' '$2 == "skipped"' "$STEPS" | wc -l)
  if ! python3 "$ROOT/tests/gpu/summarize.py" "$STEPS" "$OUT_DIR" "$WORK" \
       "$(( $(date +%s) - START ))"; then
    echo "device_checks: summarize.py failed; writing a minimal summary.json"
    printf '{"passed": %d, "failed": %d, "skipped": %d}\n' "$passed" "$failed" "$skipped" \
      > "$OUT_DIR/summary.json"
  fi
  echo "device_checks: $skipped skipped, $(( $(date +%s) - START )) s in all"
  echo "device_checks: $passed passed, $failed failed"
  [[ "$failed" -eq 0 ]]
}

# name status seconds kind artifact note  (one line of steps.tsv; summarize.py reads it)
record() {
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "${5:-}" "${6:-}" >> "$STEPS"
  echo "--- $1: $2 (${3}s)${6:+: $6}"
}

seconds_left() { echo $(( BUDGET_S - ($(date +%s) - START) )); }

# Runs "$@" under timeout with cap min($2, time left - 5); sets RC, TOOK, OUTFILE.
timed() {
  local name=$1 cap=$2; shift 2
  local left; left=$(seconds_left)
  (( cap > left - 5 )) && cap=$(( left - 5 ))
  OUTFILE="$WORK/$name.out"
  echo "=== $name (timeout ${cap}s): $*"
  local t0; t0=$(date +%s.%N)
  timeout --kill-after=10 "$cap" "$@" 2>&1 | tee "$OUTFILE"
  RC=${PIPESTATUS[0]}
  TOOK=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}')
  (( RC == 124 || RC == 137 )) && echo "=== $name: timed out after ${cap}s"
}

step_environment() {
  echo "=== environment"
  uname -a
  ldd --version 2>&1 | head -1
  HAVE_GPU=0
  if command -v nvidia-smi >/dev/null 2>&1; then
    timeout 30 nvidia-smi 2>&1
    local fields=index,name,driver_version,memory.total,clocks.sm,clocks.mem,power.limit
    timeout 30 nvidia-smi --query-gpu="$fields" --format=csv 2>&1 | tee "$WORK/gpus.csv"
    local gpus; gpus=$(timeout 30 nvidia-smi -L 2>/dev/null)
    [[ "$gpus" == *"GPU "* ]] && HAVE_GPU=1
  else
    echo "nvidia-smi: not found (no NVIDIA driver here)"
  fi
  local nvcc; nvcc=$(command -v nvcc || ls /usr/local/cuda*/bin/nvcc 2>/dev/null | head -1)
  [[ -n "$nvcc" ]] && "$nvcc" --version | tail -2
  python3 - <<'PY' 2>/dev/null
import importlib.metadata as m
for p in ("nvidia-nccl-cu13", "nvidia-cublas", "nvidia-cuda-runtime", "torch"):
    try:
        print(f"pip {p} {m.version(p)}")
    except m.PackageNotFoundError:
        print(f"pip {p}: not installed")
PY
  if (( HAVE_GPU )); then
    record environment ok 0 env "$WORK/gpus.csv" "GPU visible"
  else
    record environment skipped 0 env "" "no GPU visible: device steps will skip"
  fi
}

# Directories that may hold the CUDA libraries: toolkits, the system, python's nvidia wheels.
library_dirs() {
  local d sp
  for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda-*/lib64 \
           /usr/local/cuda-*/targets/x86_64-linux/lib /usr/local/nvidia/lib64 /usr/local/nvidia/lib \
           /usr/lib/x86_64-linux-gnu /usr/lib64; do
    [[ -d "$d" ]] && echo "$d"
  done
  for sp in $(python3 -c 'import site; print("\n".join(site.getsitepackages()))' 2>/dev/null) \
            /opt/torch/.venv/lib/python3*/site-packages /usr/local/lib/python3*/dist-packages; do
    [[ -d "$sp/nvidia" ]] || continue
    for d in "$sp"/nvidia/*/lib "$sp"/nvidia/*/lib64 "$sp"/nvidia/cu13/lib; do
      [[ -d "$d" ]] && echo "$d"
    done
  done
}

setup_libraries() {
  echo "=== libraries"
  local dirs=() soname d found
  mapfile -t dirs < <(library_dirs | awk '!seen[$0]++')
  LLP="$BUNDLE/lib"
  : > "$WORK/libraries.tsv"
  for soname in libcudart.so.13 libcublasLt.so.13 libcublas.so.13 libnccl.so.2 libcuda.so.1; do
    found=""
    for d in "$BUNDLE/lib" "${dirs[@]}"; do
      if [[ -e "$d/$soname" ]]; then found="$d"; break; fi
    done
    if [[ -n "$found" ]]; then
      echo "$soname: $found/$soname ($(du -Lh "$found/$soname" | cut -f1))"
      printf '%s\t%s\n' "$soname" "$found/$soname" >> "$WORK/libraries.tsv"
      [[ ":$LLP:" == *":$found:"* ]] || LLP="$LLP:$found"
    else
      echo "$soname: NOT FOUND in ${dirs[*]}"
      printf '%s\t%s\n' "$soname" "not found" >> "$WORK/libraries.tsv"
    fi
  done
  export LD_LIBRARY_PATH="$LLP${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
}

# The bundle's binaries are xz-compressed: unpack them into $BIN (xz, or python's lzma).
unpack_binaries() {
  BIN="$WORK/bin"
  mkdir -p "$BIN"
  local f name
  for f in "$BUNDLE"/bin/*; do
    [[ -f "$f" ]] || continue
    name=$(basename "$f" .xz)
    if [[ "$f" == *.xz ]]; then
      xz -dc "$f" > "$BIN/$name" 2>/dev/null ||
        python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' \
          "$f" "$BIN/$name" || echo "cannot unpack $f"
    else
      cp "$f" "$BIN/$name"
    fi
    chmod +x "$BIN/$name"
  done
  echo "binaries: $(ls "$BIN" | tr '\n' ' ')"
}

# Sets RUN_ENV for `bin`: lib-compat first when the machine's libstdc++ is too old. Prints ldd
# and returns 1 when a library still cannot be resolved.
can_start() {
  local bin=$1
  RUN_ENV="LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  # (ldd's output is kept first: with pipefail, `ldd | grep -q` fails when grep exits early.)
  local out; out=$(ldd "$bin" 2>&1)
  [[ "$out" == *"not found"* ]] || return 0
  local compat="$BUNDLE/lib-compat:$LD_LIBRARY_PATH"
  out=$(LD_LIBRARY_PATH="$compat" ldd "$bin" 2>&1)
  if [[ "$out" != *"not found"* ]]; then
    echo "$(basename "$bin"): using the bundle's libstdc++ (lib-compat/)"
    RUN_ENV="LD_LIBRARY_PATH=$compat"
    return 0
  fi
  echo "$(basename "$bin") cannot start; ldd:"
  echo "$out"
  return 1
}

# After a run: a loader failure shows as rc 127 or the loader's message; print ldd then.
explain_start_failure() {
  local bin=$1
  if (( RC == 127 )) || grep -qE 'error while loading shared libraries|version .GLIBC' "$OUTFILE"; then
    echo "$(basename "$bin") failed to start; ldd:"
    env "$RUN_ENV" ldd "$bin" 2>&1
    START_FAILURES=$(( ${START_FAILURES:-0} + 1 ))
  fi
}

run_gtest() {  # name cap [VAR=value ...]
  local name=$1 cap=$2 bin="$BIN/$1"
  local extra=("${@:3}")
  if [[ ! -x "$bin" ]]; then record "$name" skipped 0 gtest "" "not in the bundle"; return; fi
  if (( $(seconds_left) < 20 )); then record "$name" skipped 0 gtest "" "time budget used"; return; fi
  if ! can_start "$bin"; then
    START_FAILURES=$(( ${START_FAILURES:-0} + 1 ))
    record "$name" failed 0 gtest "" "cannot start (see ldd above)"
    return
  fi
  timed "$name" "$cap" env "$RUN_ENV" "${extra[@]}" "$bin" --gtest_output="json:$WORK/$name.json"
  explain_start_failure "$bin"
  local skips; skips=$(grep -m1 -o '^\[  SKIPPED \] [0-9]* test' "$OUTFILE" | grep -o '[0-9]*')
  if (( RC == 0 )); then
    if (( ! HAVE_GPU )); then
      record "$name" skipped "$TOOK" gtest "$WORK/$name.json" "no GPU: device tests skipped"
    elif grep -qE 'cudaGetDeviceCount failed|no CUDA driver found' "$OUTFILE"; then
      # nvidia-smi sees a GPU but the CUDA runtime does not: the tests skipped, nothing ran.
      record "$name" failed "$TOOK" gtest "$WORK/$name.json" \
        "GPU visible but not to the CUDA runtime: $(grep -m1 -oE '(cudaGetDeviceCount failed|no CUDA driver found)[^;]*' "$OUTFILE")"
    else
      record "$name" ok "$TOOK" gtest "$WORK/$name.json" "${skips:+$skips skipped}"
    fi
  else
    record "$name" failed "$TOOK" gtest "$WORK/$name.json" "exit status $RC"
  fi
}

run_bench() {
  local format=$1 cap=$2 name="gpu_bench_$1" bin="$BIN/gpu_bench"
  local json="$OUT_DIR/bench_$1.json"
  if [[ ! -x "$bin" ]]; then record "$name" skipped 0 bench "" "not in the bundle"; return; fi
  if (( $(seconds_left) < 30 )); then record "$name" skipped 0 bench "" "time budget used"; return; fi
  if ! can_start "$bin"; then
    START_FAILURES=$(( ${START_FAILURES:-0} + 1 ))
    record "$name" failed 0 bench "" "cannot start (see ldd above)"
    return
  fi
  timed "$name" "$cap" env "$RUN_ENV" "$bin" --formats="$format" --json="$json"
  explain_start_failure "$bin"
  local why; why=$(grep -m1 'SKIP' "$OUTFILE" | cut -c1-200)
  # No CUDA backend in the build is a skip; no device while nvidia-smi shows one is a failure.
  (( RC == 77 && HAVE_GPU )) && [[ "$why" == *FAILED_PRECONDITION* ]] && RC=1
  case $RC in
    0) record "$name" ok "$TOOK" bench "$json" ;;
    77) record "$name" skipped "$TOOK" bench "$json" "$why" ;;
    *) record "$name" failed "$TOOK" bench "$json" "exit status $RC${why:+: $why}" ;;
  esac
}

# The CUDA backend against the GPU's two ceilings, kernel by kernel (kernels/cuda/README.md):
# copy bandwidth, fp8 GEMV GB/s per matrix of an 8B layer, one decode step through the ops, and
# 2048-row GEMM TFLOP/s (fp8 path, cuBLASLt fp8 alone, bf16).
run_kernel_bench() {
  local cap=$1 name=cuda_bench bin="$BIN/cuda_bench"
  if [[ ! -x "$bin" ]]; then record "$name" skipped 0 bench "" "not in the bundle"; return; fi
  if (( $(seconds_left) < 30 )); then record "$name" skipped 0 bench "" "time budget used"; return; fi
  if ! can_start "$bin"; then
    START_FAILURES=$(( ${START_FAILURES:-0} + 1 ))
    record "$name" failed 0 bench "" "cannot start (see ldd above)"
    return
  fi
  timed "$name" "$cap" env "$RUN_ENV" "$bin" --quick
  explain_start_failure "$bin"
  case $RC in
    0) record "$name" ok "$TOOK" bench "$OUTFILE" ;;
    77) record "$name" skipped "$TOOK" bench "$OUTFILE" "$(grep -m1 'SKIP' "$OUTFILE" | cut -c1-200)" ;;
    *) record "$name" failed "$TOOK" bench "$OUTFILE" "exit status $RC" ;;
  esac
}

# The machine's own nvcc builds and runs tests/gpu/smoke.cu: proves the driver and toolchain
# even when the bundled binaries cannot start.
run_smoke() {
  local cap=$1 nvcc
  nvcc=$(command -v nvcc || ls /usr/local/cuda*/bin/nvcc 2>/dev/null | head -1)
  if [[ -z "$nvcc" ]]; then record nvcc_smoke skipped 0 smoke "" "no nvcc"; return; fi
  if (( $(seconds_left) < 30 )); then record nvcc_smoke skipped 0 smoke "" "time budget used"; return; fi
  timed nvcc_smoke "$cap" bash -c "'$nvcc' -O2 -gencode arch=compute_90,code=sm_90 \
    -o '$WORK/smoke' '$ROOT/tests/gpu/smoke.cu' && '$WORK/smoke'"
  case $RC in
    0) record nvcc_smoke ok "$TOOK" smoke "$OUTFILE" "$(grep -m1 '^smoke:' "$OUTFILE")" ;;
    77) record nvcc_smoke skipped "$TOOK" smoke "$OUTFILE" "$(grep -m1 '^smoke:' "$OUTFILE")" ;;
    *) record nvcc_smoke failed "$TOOK" smoke "$OUTFILE" "exit status $RC" ;;
  esac
}

OUT_DIR="${1:-${OUT:-/tmp/device_checks_out}}"
mkdir -p "$OUT_DIR"
main "$OUT_DIR" 2>&1 | tee "$OUT_DIR/device_checks.log"
exit "${PIPESTATUS[0]}"
