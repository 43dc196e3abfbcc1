#!/usr/bin/env bash
# Batch-1 decode and 512-token prefill of SmolLM2 for each weight format, llama.cpp beside it in
# the same run wherever llama.cpp has the format (docs/PERFORMANCE.md, "Every weight format
# beside llama.cpp").
# The GGUFs are llama.cpp's own quantizations of an F32 GGUF of the bundled weights
# (bench/llama_cpp_accuracy.py --make_quants, also run by bench/run_accuracy.sh); fp8, fp8-block,
# int4 and bf16 have no GGUF type, so tpserve quantizes the F32 weights on load and llama.cpp
# has no figure. f32 KV cache and no flash attention on both sides, as bench/run_bench.sh.
#   bash bench/run_format_bench.sh [--threads=1,2] [--repeats=3]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bazel_cache.sh  # the disk cache every script shares
threads=1,2; repeats=3
for arg in "$@"; do
  case "$arg" in
    --threads=*) threads="${arg#*=}" ;;
    --repeats=*) repeats="${arg#*=}" ;;
    *) echo "unknown argument $arg" >&2; exit 2 ;;
  esac
done
dir="${TPSERVE_MODEL_DIR:-$HOME/.cache/tpserve}"
out="$dir/accuracy"
python3 bench/llama_cpp_accuracy.py --make_quants "$dir/SmolLM2-135M-Instruct.Q4_1.gguf" \
  --out_dir "$out" >&2
bazel build -c opt --symlink_prefix=/ //bench:model_bench >&2
bench="$(bazel info -c opt bazel-bin 2>/dev/null)/bench/model_bench"
echo "date: $(date -u +%Y-%m-%dT%H:%MZ)  cpu: $(lscpu | sed -n 's/^Model name: *//p')  cores: $(nproc)  load: $(cut -d' ' -f1-3 /proc/loadavg)"
f32="$out/SmolLM2-135M-Instruct.F32.gguf"
for gguf in "$dir/SmolLM2-135M-Instruct.Q4_1.gguf" "$out/SmolLM2-135M-Instruct.Q4_K_M.gguf" \
            "$out/SmolLM2-135M-Instruct.Q6_K.gguf" "$out/SmolLM2-135M-Instruct.Q8_0.gguf" "$f32"; do
  echo "== $(basename "$gguf")  load: $(cut -d' ' -f1-3 /proc/loadavg)"
  "$bench" --model="$gguf" --threads="$threads" --repeats="$repeats" --kv_dtype=f32
  python3 bench/llama_cpp_bench.py --model "$gguf" --threads "$threads" --repeats "$repeats" --kv_dtype f32
done
for fmt in fp8 fp8-block int4 int4-g64 bf16; do
  echo "== F32 weights quantized on load to $fmt  load: $(cut -d' ' -f1-3 /proc/loadavg)"
  "$bench" --model="$f32" --weights="$fmt" --threads="$threads" --repeats="$repeats" --kv_dtype=f32
done
