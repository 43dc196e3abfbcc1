#!/bin/bash
# Builds the CUDA parity and benchmark programs on this (Bazel) machine and stages them for a GPU
# machine without Bazel: the two binaries, device_check.sh, and the non-CUDA shared libraries
# they link that a GPU image may lack (Debian's Abseil, libstdc++ of g++ 12). CUDA's own
# libraries are not staged (libcublasLt alone is ~500 MB): device_check.sh finds the GPU
# machine's libcudart.so.13 and libcublasLt.so.13.
#
#   kernels/cuda/stage_device_run.sh [DIR]     # DIR defaults to .devrun-cuda in the repo root
#
# Run from the repository root. Prints the staged size (the device tool carries up to 64 MiB).
set -euo pipefail
dir=${1:-.devrun-cuda}
bazel build //kernels/cuda:cuda_parity //kernels/cuda:cuda_bench
mkdir -p "$dir/lib"
bins=(bazel-bin/kernels/cuda/cuda_parity bazel-bin/kernels/cuda/cuda_bench)
cp -f "${bins[@]}" kernels/cuda/device_check.sh "$dir/"
chmod u+w "$dir"/cuda_parity "$dir"/cuda_bench
for lib in $(ldd "${bins[@]}" | awk '/=> \// {print $3}' | sort -u); do
  case $(basename "$lib") in
    libcuda*|libcublas*|libc.so*|libm.so*|libpthread*|libdl.so*|librt.so*|ld-linux*) continue ;;
  esac
  cp -fL "$lib" "$dir/lib/"
done
du -sh "$dir"
