#!/usr/bin/env bash
# Runs //bench:gpu_bench tiny on the CPU backend: every phase of the GPU benchmark (synthetic
# weights, quantize on load, copy bandwidth, prefill and decode timings, table, JSON) except
# the device itself. Then checks the JSON says what the table said.
set -euo pipefail
bench="$(dirname "$0")/gpu_bench"
[[ -x "$bench" ]] || bench="bench/gpu_bench"
out="${TEST_TMPDIR:-/tmp}/gpu_bench_cpu.json"
"$bench" --backend=cpu --threads=2 --layers=2 --hidden=256 --heads=4 --kv_heads=2 \
  --head_dim=64 --ffn=512 --vocab=1024 --prefill_tokens=64 --context=32 --batch=4 \
  --decode_steps=2 --warmup=1 --runs=2 --copy_mib=16 --json="$out"
python3 - "$out" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
assert s["status"] == "ok", s
assert s["shape"]["layers"] == 2 and s["shape"]["hidden"] == 256, s["shape"]
assert s["hbm_copy"]["gbps"] > 0
for name in ("fp8", "bf16"):
    f = s["formats"][name]
    assert f["status"] == "ok", (name, f)
    assert f["logits_finite"] is True
    assert f["decode_batch1"]["tokens_per_s"] > 0 and f["decode_batchN"]["batch"] == 4
    assert f["prefill"]["tflops"] > 0 and f["prefill"]["peak_tflops_used"] > 0
assert s["formats"]["fp8"]["prefill"]["peak_name"] == "dense FP8"
assert s["formats"]["fp8"]["weight_bytes"] < s["formats"]["bf16"]["weight_bytes"]
print("gpu_bench_cpu_test: JSON checks passed")
PY
