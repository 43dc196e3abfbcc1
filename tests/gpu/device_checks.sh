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
# $OUT/device_checks.log; $OUT/summary.json has each step's status (ok / failed / not_run),
# seconds and key figures, and every check that did not run; the benchmarks' own JSON lands in
# $OUT/bench_*.json.
#
# Nothing that did not run passes silently (summarize.py decides, from each step's status and
# each gtest's XML report): a step not in the bundle, not started for lack of time, cut by its
# `timeout`, or skipped by its binary, and every single gtest case that skipped (GTEST_SKIP: "no
# CUDA device", a second GPU needed) or was disabled, is printed as a "NOT RUN" line with its
# reason. On a machine with a GPU the exit status is 1 unless every such item is on the expected
# list, tests/gpu/expected_not_run.txt (printed with the result; e.g. the two-GPU NCCL cases on a
# one-GPU machine). Without a GPU (the build machine) every device step is NOT RUN (no GPU) and
# only a failed step makes the exit status 1, as before.
# The last line is "device_checks: N passed, M failed, K not run (...)" (steps passed and failed;
# checks not run, steps and single tests, and how many of them were expected).
# A binary that cannot start (a missing library, a too-old glibc) gets its ldd printed.
# Budget: the steps share DEVICE_CHECKS_BUDGET_S (330 s) and each has its own cap; expected total
# about 2 minutes. DEVICE_CHECKS_ONLY="step ..." runs only those steps (the result says so),
# DEVICE_CHECKS_MAX_STEP_S caps every step (both for a quick rerun, and for tests/gpu's test);
# DEVICE_CHECKS_EXPECTED names another expected list (the test's).
set -uo pipefail

main() {
  OUT_DIR="$1"
  ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
  BUNDLE="${GPU_BUNDLE:-$ROOT/gpu-bundle}"
  BUDGET_S="${DEVICE_CHECKS_BUDGET_S:-330}"
  MAX_STEP_S="${DEVICE_CHECKS_MAX_STEP_S:-}"
  ONLY="${DEVICE_CHECKS_ONLY:-}"
  WORK="$(mktemp -d /tmp/device_checks.XXXXXX)"
  START=$(date +%s)
  STEPS="$WORK/steps.tsv"
  : > "$STEPS"
  echo "device_checks: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname), bundle $BUNDLE"
  [[ -f "$BUNDLE/MANIFEST.txt" ]] && sed -n '1,5p' "$BUNDLE/MANIFEST.txt"
  [[ -n "$ONLY" ]] && echo "device_checks: DEVICE_CHECKS_ONLY: running only $ONLY"

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
  # Fused q/k/v and gate/up (issue 38): one GEMM over the stacked parts plus the split, each
  # output against its part's own MatMul (bit for bit in deterministic mode).
  run_gtest fused_matmul_test 60 TPSERVE_CUDA_CHECK=1
  # Launch set-up once per shape (issue 38): a second identical mixed GEMM (split-K included)
  # and FlashInfer step build and ask the device nothing, with the same bits.
  run_gtest launch_cache_gpu_test 60
  # Sampling on the device (issue 38): the kernel against its algorithm run on the host, rows
  # whole and as a TP-8 gather's slices; prints the time of 256 top-p rows.
  run_gtest sampling_kernels_test 60 TPSERVE_CUDA_CHECK=1
  run_bench fp8 150
  run_bench bf16 90
  # The host-sync mode (issue 38): the default blocking sync above against spinning, same run,
  # same card (a step's host waits yield the core only with blocking sync).
  run_bench bf16 90 spin
  run_kernel_bench 60
  run_smoke 60

  echo "device_checks: $(( $(date +%s) - START )) s in all"
  # summarize.py prints the NOT RUN lines, the expected list and the last line, and decides the
  # exit status: 0, or 3 when a step failed or (with a GPU) a check not expected to skip did not
  # run. Anything else is summarize.py itself failing: then decide here, failing closed.
  python3 "$ROOT/tests/gpu/summarize.py" "$STEPS" "$OUT_DIR" "$WORK" \
    "$(( $(date +%s) - START ))" --gpus="$GPU_COUNT" --only="$ONLY" \
    --expected="${DEVICE_CHECKS_EXPECTED:-$ROOT/tests/gpu/expected_not_run.txt}"
  case $? in
    0) return 0 ;;
    3) return 1 ;;
  esac
  local passed failed not_run
  passed=$(awk -F'\t' '$2 == "ok"' "$STEPS" | wc -l)
  failed=$(awk -F'\t' '$2 == "failed"' "$STEPS" | wc -l)
  not_run=$(awk -F'\t' '$2 == "not_run"' "$STEPS" | wc -l)
  printf '{"passed": %d, "failed": %d, "not_run": %d, "summarize": "failed"}\n' \
    "$passed" "$failed" "$not_run" > "$OUT_DIR/summary.json"
  awk -F'\t' '$2 == "not_run" { print "device_checks: NOT RUN " $1 ": " $6 }' "$STEPS"
  echo "device_checks: summarize.py failed: single tests' skips unchecked$( ((GPU_COUNT)) && echo ', so this run fails')"
  echo "device_checks: $passed passed, $failed failed, $not_run not run (steps only)"
  [[ "$failed" -eq 0 && "$GPU_COUNT" -eq 0 ]]
}

# Whether step `name` is to run (DEVICE_CHECKS_ONLY lists the steps to run; empty: all).
selected() { [[ -z "$ONLY" || " $ONLY " == *" $1 "* ]]; }

# name status seconds kind artifact note  (one line of steps.tsv; summarize.py reads it).
# status: ok, failed or not_run (the note says why); a note is one line without tabs.
record() {
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "${5:-}" "${6:-}" >> "$STEPS"
  echo "--- $1: $2 (${3}s)${6:+: $6}"
}

seconds_left() { echo $(( BUDGET_S - ($(date +%s) - START) )); }

# Runs "$@" under timeout with cap min($2, DEVICE_CHECKS_MAX_STEP_S, time left - 5); sets RC,
# TOOK, OUTFILE, and CAP (the cap used) and CAP_WHY (what set it) for was_cut.
timed() {
  local name=$1; shift
  CAP=$1; CAP_WHY="its own cap"; shift
  local left; left=$(seconds_left)
  if [[ -n "$MAX_STEP_S" ]] && (( CAP > MAX_STEP_S )); then
    CAP=$MAX_STEP_S; CAP_WHY="DEVICE_CHECKS_MAX_STEP_S"
  fi
  if (( CAP > left - 5 )); then
    CAP=$(( left - 5 )); CAP_WHY="the time budget left (DEVICE_CHECKS_BUDGET_S=$BUDGET_S)"
  fi
  OUTFILE="$WORK/$name.out"
  echo "=== $name (timeout ${CAP}s): $*"
  local t0; t0=$(date +%s.%N)
  timeout --kill-after=10 "$CAP" "$@" 2>&1 | tee "$OUTFILE"
  RC=${PIPESTATUS[0]}
  TOOK=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}')
  (( RC == 124 || RC == 137 )) && echo "=== $name: timed out after ${CAP}s"
}

# After `timed`: whether the step was cut by its timeout (exit 124, or 137 when it ignored the
# TERM), and if so the NOT RUN reason in CUT_REASON.
was_cut() {
  (( RC == 124 || RC == 137 )) || return 1
  CUT_REASON="cut by the time budget: timed out after ${CAP}s, set by $CAP_WHY (exit $RC)"
  return 0
}

# Whether there is time to start step `name`, which needs `seconds`; records it NOT RUN if not.
has_time() {  # name kind seconds
  local left; left=$(seconds_left)
  (( left >= $3 )) && return 0
  record "$1" not_run 0 "$2" "" \
    "not started: time budget used (${left}s of DEVICE_CHECKS_BUDGET_S=${BUDGET_S}s left, $3 s needed)"
  return 1
}

step_environment() {
  echo "=== environment"
  uname -a
  ldd --version 2>&1 | head -1
  HAVE_GPU=0
  GPU_COUNT=0  # summarize.py checks the expected list against it (e.g. gpus<2)
  if command -v nvidia-smi >/dev/null 2>&1; then
    timeout 30 nvidia-smi 2>&1
    local fields=index,name,driver_version,memory.total,clocks.sm,clocks.mem,power.limit
    timeout 30 nvidia-smi --query-gpu="$fields" --format=csv 2>&1 | tee "$WORK/gpus.csv"
    local gpus; gpus=$(timeout 30 nvidia-smi -L 2>/dev/null)
    GPU_COUNT=$(grep -c '^GPU [0-9]' <<<"$gpus")
    (( GPU_COUNT > 0 )) && HAVE_GPU=1
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
    record environment ok 0 env "$WORK/gpus.csv" "$GPU_COUNT GPU(s) visible"
  else
    record environment not_run 0 env "" "no GPU visible: every device step is NOT RUN"
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
  selected "$name" || return 0
  if [[ ! -x "$bin" ]]; then record "$name" not_run 0 gtest "" "not in the bundle"; return; fi
  has_time "$name" gtest 20 || return 0
  if ! can_start "$bin"; then
    START_FAILURES=$(( ${START_FAILURES:-0} + 1 ))
    record "$name" failed 0 gtest "" "cannot start (see ldd above)"
    return
  fi
  # The XML report, not JSON: its <skipped message=...> carries each GTEST_SKIP's reason.
  local xml="$WORK/$name.xml"
  timed "$name" "$cap" env "$RUN_ENV" "${extra[@]}" "$bin" --gtest_output="xml:$xml"
  explain_start_failure "$bin"
  if was_cut; then
    local passed_before; passed_before=$(grep -c '^\[       OK \]' "$OUTFILE")
    record "$name" not_run "$TOOK" gtest "" "$CUT_REASON; $passed_before tests had passed"
    return
  fi
  local skips; skips=$(grep -m1 -o '^\[  SKIPPED \] [0-9]* test' "$OUTFILE" | grep -o '[0-9]*')
  if (( RC == 0 )); then
    if (( ! HAVE_GPU )); then
      record "$name" not_run "$TOOK" gtest "$xml" "no GPU: device tests skipped"
    elif grep -qE 'cudaGetDeviceCount failed|no CUDA driver found' "$OUTFILE"; then
      # nvidia-smi sees a GPU but the CUDA runtime does not: the tests skipped, nothing ran.
      record "$name" failed "$TOOK" gtest "$xml" \
        "GPU visible but not to the CUDA runtime: $(grep -m1 -oE '(cudaGetDeviceCount failed|no CUDA driver found)[^;]*' "$OUTFILE")"
    else
      # Its skipped tests, one by one, are summarize.py's to list and check.
      record "$name" ok "$TOOK" gtest "$xml" "${skips:+$skips skipped}"
    fi
  else
    record "$name" failed "$TOOK" gtest "$xml" "exit status $RC"
  fi
}

# run_bench FORMAT CAP [SYNC]: gpu_bench on FORMAT; SYNC, when given, is the host-sync mode
# (TPSERVE_CUDA_HOST_SYNC: spin, yield, blocking_sync) and names the step gpu_bench_FORMAT_SYNC.
run_bench() {
  local format=$1 cap=$2 sync=${3:-} name="gpu_bench_$1${3:+_$3}" bin="$BIN/gpu_bench"
  local json="$OUT_DIR/bench_$1${3:+_$3}.json"
  selected "$name" || return 0
  if [[ ! -x "$bin" ]]; then record "$name" not_run 0 bench "" "not in the bundle"; return; fi
  has_time "$name" bench 30 || return 0
  if ! can_start "$bin"; then
    START_FAILURES=$(( ${START_FAILURES:-0} + 1 ))
    record "$name" failed 0 bench "" "cannot start (see ldd above)"
    return
  fi
  timed "$name" "$cap" env "$RUN_ENV" ${sync:+TPSERVE_CUDA_HOST_SYNC=$sync} "$bin" \
    --formats="$format" --json="$json"
  explain_start_failure "$bin"
  if was_cut; then record "$name" not_run "$TOOK" bench "" "$CUT_REASON"; return; fi
  local why; why=$(grep -m1 'SKIP' "$OUTFILE" | cut -c1-200)
  # No CUDA backend in the build is a skip; no device while nvidia-smi shows one is a failure.
  (( RC == 77 && HAVE_GPU )) && [[ "$why" == *FAILED_PRECONDITION* ]] && RC=1
  case $RC in
    0) record "$name" ok "$TOOK" bench "$json" ;;
    77) record "$name" not_run "$TOOK" bench "$json" "skipped (exit 77): ${why:-no reason printed}" ;;
    *) record "$name" failed "$TOOK" bench "$json" "exit status $RC${why:+: $why}" ;;
  esac
}

# The CUDA backend against the GPU's two ceilings, kernel by kernel (kernels/cuda/README.md):
# copy bandwidth, fp8 GEMV GB/s per matrix of an 8B layer, one decode step through the ops, and
# 2048-row GEMM TFLOP/s (fp8 path, cuBLASLt fp8 alone, bf16).
run_kernel_bench() {
  local cap=$1 name=cuda_bench bin="$BIN/cuda_bench"
  selected "$name" || return 0
  if [[ ! -x "$bin" ]]; then record "$name" not_run 0 bench "" "not in the bundle"; return; fi
  has_time "$name" bench 30 || return 0
  if ! can_start "$bin"; then
    START_FAILURES=$(( ${START_FAILURES:-0} + 1 ))
    record "$name" failed 0 bench "" "cannot start (see ldd above)"
    return
  fi
  timed "$name" "$cap" env "$RUN_ENV" "$bin" --quick
  explain_start_failure "$bin"
  if was_cut; then record "$name" not_run "$TOOK" bench "" "$CUT_REASON"; return; fi
  local why; why=$(grep -m1 'SKIP' "$OUTFILE" | cut -c1-200)
  case $RC in
    0) record "$name" ok "$TOOK" bench "$OUTFILE" ;;
    77) record "$name" not_run "$TOOK" bench "$OUTFILE" "skipped (exit 77): ${why:-no reason printed}" ;;
    *) record "$name" failed "$TOOK" bench "$OUTFILE" "exit status $RC" ;;
  esac
}

# The machine's own nvcc builds and runs tests/gpu/smoke.cu: proves the driver and toolchain
# even when the bundled binaries cannot start.
run_smoke() {
  local cap=$1 nvcc
  selected nvcc_smoke || return 0
  nvcc=$(command -v nvcc || ls /usr/local/cuda*/bin/nvcc 2>/dev/null | head -1)
  if [[ -z "$nvcc" ]]; then record nvcc_smoke not_run 0 smoke "" "no nvcc on this machine"; return; fi
  has_time nvcc_smoke smoke 30 || return 0
  timed nvcc_smoke "$cap" bash -c "'$nvcc' -O2 -gencode arch=compute_90,code=sm_90 \
    -o '$WORK/smoke' '$ROOT/tests/gpu/smoke.cu' && '$WORK/smoke'"
  if was_cut; then record nvcc_smoke not_run "$TOOK" smoke "" "$CUT_REASON"; return; fi
  case $RC in
    0) record nvcc_smoke ok "$TOOK" smoke "$OUTFILE" "$(grep -m1 '^smoke:' "$OUTFILE")" ;;
    77) record nvcc_smoke not_run "$TOOK" smoke "$OUTFILE" "skipped (exit 77): $(grep -m1 '^smoke:' "$OUTFILE")" ;;
    *) record nvcc_smoke failed "$TOOK" smoke "$OUTFILE" "exit status $RC" ;;
  esac
}

OUT_DIR="${1:-${OUT:-/tmp/device_checks_out}}"
mkdir -p "$OUT_DIR"
main "$OUT_DIR" 2>&1 | tee "$OUT_DIR/device_checks.log"
exit "${PIPESTATUS[0]}"
