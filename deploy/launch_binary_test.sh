#!/usr/bin/env bash
# The coordinator's program (//deploy:launch) against two findings of the GPU-path review:
# 1. It links no NCCL: rank 0 makes the NCCL unique id (comm/nccl_unique_id.h), so NCCL's
#    bootstrap root never listens in a process without a GPU. Checked on the binary's NEEDED
#    entries, and against the worker, which must link NCCL in a CUDA build (else the check
#    would see nothing).
# 2. `launch --gpus=8 --model=405b-fp8` on a machine without a CUDA driver plans for the
#    product's H100 80GB (it assumed an H200) and says so in one line, not with the CUDA
#    runtime's "driver version is insufficient for CUDA runtime version".
# 3. Its step budget is vram's (base/step_budget.h): 2048 tokens per step on GPUs unless
#    --max_tokens_per_step says otherwise, and a negative value is refused by name.
# Args: LAUNCH WORKER CUDA_BUILD (1 or 0).
set -euo pipefail
launch=$1 worker=$2 cuda_build=$3
fail() { printf 'FAIL: %b\n' "$*" >&2; exit 1; }
needed() { readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; }

nccl=$(needed "$launch" | grep '^libnccl' || true)
[[ -z $nccl ]] || fail "launch links $nccl"
if [[ $cuda_build == 1 ]] && ! needed "$worker" | grep -q '^libnccl\.so'; then
  fail "the worker links no libnccl in a CUDA build, so the check above proves nothing"
fi
echo "ok: launch links no NCCL (CUDA build: $cuda_build)"

if [[ -e /proc/driver/nvidia/version ]]; then
  echo "skipped: this machine has an NVIDIA driver, so launch plans for its GPUs"
  exit 0
fi
rc=0
out=$("$launch" --gpus=8 --model=405b-fp8 2>&1) || rc=$?
[[ $rc == 2 ]] || fail "exit status $rc, expected 2; output:\n$out"
grep -q '^llama-3.1-405b | weights fp8 | .* | 8 x h100-80g (tp=8, pp=1)$' <<<"$out" ||
  fail "no plan for 8 x h100-80g; output:\n$out"
if [[ $cuda_build == 1 ]]; then why="no CUDA driver found"; else why="this build has no CUDA"; fi
want="launch: $why"
[[ $(tail -n 1 <<<"$out") == "$want"* ]] || fail "last line is not '$want...'; output:\n$out"
[[ $(grep -c 'CUDA driver\|this build has no CUDA' <<<"$out") == 1 ]] ||
  fail "more than one line about the driver; output:\n$out"
! grep -qi 'insufficient\|runtime version' <<<"$out" ||
  fail "the CUDA runtime's version message leaked; output:\n$out"
echo "ok: $(tail -n 1 <<<"$out")"

grep -q '^ *step buffers *for 2048 tokens per step ' <<<"$out" ||
  fail "the GPU plan is not for 2048 tokens per step; output:\n$out"
out=$("$launch" --gpus=8 --model=405b-fp8 --max_tokens_per_step=1024 2>&1) || true
grep -q '^ *step buffers *for 1024 tokens per step ' <<<"$out" ||
  fail "--max_tokens_per_step=1024 is not the plan's budget; output:\n$out"
rc=0
out=$("$launch" --gpus=8 --model=405b-fp8 --max_tokens_per_step=-3 2>&1) || rc=$?
want="launch: --max_tokens_per_step = -3 must be >= 1 (or 0: 2048 on GPUs)"
[[ $rc == 2 && $(tail -n 1 <<<"$out") == "$want" ]] ||
  fail "exit $rc, expected 2 and '$want'; output:\n$out"
echo "ok: the step budget is 2048 on GPUs, --max_tokens_per_step overrides it, -3 is refused"
