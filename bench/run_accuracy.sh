#!/usr/bin/env bash
# docs/ACCURACY.md's figures, ours and llama.cpp's, in one run on the bundled SmolLM2:
#   1. llama.cpp makes an F32 GGUF of the bundled Q4_1 weights (an exact dequantization) and
#      Q4_K_M, Q6_K and Q8_0 quantizations of it;
#   2. tools/checkpoints/gguf_to_hf.py writes AWQ and GPTQ (int4, group 64, round-to-nearest
#      from the public layouts: no calibration) and FP8 (fbgemm) Hugging Face checkpoints of the
#      F32 weights;
#   3. //bench:accuracy scores, against our F32 model of those weights: quantize-on-load fp8,
#      fp8-block, int4 (g96 here: SmolLM2's 576 columns do not divide into 128), int4-g64,
#      int4-g32, bf16; the KV dtypes; the AWQ/GPTQ/FP8 checkpoints; the llama.cpp GGUFs run by us;
#   4. bench/llama_cpp_accuracy.py scores the same GGUFs in llama.cpp against its F32 GGUF.
#   bash bench/run_accuracy.sh [--windows=4]      (~15 minutes on 2 cores)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bazel_cache.sh  # the disk cache every script shares
windows=4
for arg in "$@"; do
  case "$arg" in
    --windows=*) windows="${arg#*=}" ;;
    *) echo "unknown argument $arg" >&2; exit 2 ;;
  esac
done
dir="${TPSERVE_MODEL_DIR:-$HOME/.cache/tpserve}"
out="$dir/accuracy"
src="$dir/SmolLM2-135M-Instruct.Q4_1.gguf"
echo "date: $(date -u +%Y-%m-%dT%H:%MZ)  cpu: $(lscpu | sed -n 's/^Model name: *//p')  cores: $(nproc)  load: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 bench/llama_cpp_accuracy.py --make_quants "$src" --out_dir "$out" >&2
f32="$out/SmolLM2-135M-Instruct.F32.gguf"
for fmt in awq-g64 gptq-g64-asym fp8-fbgemm-all; do
  [ -f "$out/hf-$fmt/config.json" ] || \
    python3 tools/checkpoints/gguf_to_hf.py --gguf "$f32" --out "$out/hf-$fmt" --format "$fmt" >&2
done
bazel build -c opt --symlink_prefix=/ //bench:accuracy >&2
"$(bazel info -c opt bazel-bin 2>/dev/null)/bench/accuracy" --model="$f32" \
  --text=tests/accuracy/english.txt,tests/accuracy/korean.txt --max_windows="$windows" \
  --reference=f32/f32 \
  --configs=fp8/f32,fp8-block/f32,int4/f32,int4-g64/f32,int4-g32/f32,bf16/f32,f32/f16,f32/bf16,f32/fp8 \
  --extra_models="awq-g64=$out/hf-awq-g64,gptq-g64=$out/hf-gptq-g64-asym,fp8-fbgemm=$out/hf-fp8-fbgemm-all,Q8_0=$out/SmolLM2-135M-Instruct.Q8_0.gguf,Q6_K=$out/SmolLM2-135M-Instruct.Q6_K.gguf,Q4_K_M=$out/SmolLM2-135M-Instruct.Q4_K_M.gguf"
python3 bench/llama_cpp_accuracy.py --reference "$f32" --max_windows "$windows" \
  --models "$out/SmolLM2-135M-Instruct.Q8_0.gguf,$out/SmolLM2-135M-Instruct.Q6_K.gguf,$out/SmolLM2-135M-Instruct.Q4_K_M.gguf"
