#!/usr/bin/env bash
# Builds the GPU check binaries HERE (bazel, -c opt) and copies them, with every shared library
# the GPU machine will not have, into gpu-bundle/ (git-ignored), which the device tool carries:
#
#   bash tests/gpu/build_bundle.sh            # then: run(command=..., carry=["gpu-bundle"])
#
# gpu-bundle/bin/   the binaries, stripped and xz-compressed: cuda_parity_test.xz,
#                   nccl_communicator_test.xz, device_wait_test.xz, gpu_bench.xz
#                   (device_checks.sh unpacks them)
# gpu-bundle/lib/   Debian's Abseil (and anything else ldd finds outside glibc), libcudart
# gpu-bundle/lib-compat/  this machine's libstdc++/libgcc_s, used there only if its own are
#                   older than the binaries need (device_checks.sh decides with ldd)
# gpu-bundle/MANIFEST.txt  what was built from which commit, what the machine must provide
#
# Left out on purpose: glibc (the machine's own), the NVIDIA driver (libcuda, libnvidia-*), and
# libcublasLt / libcublas / libnccl (hundreds of MB; the machine has them under
# /usr/local/cuda*/lib64 or python's nvidia/*/lib, which device_checks.sh searches).
# A target that does not exist in this tree (e.g. the CUDA parity test before it lands) is
# listed as missing and left out; the build of the others must succeed.
set -uo pipefail
cd "$(dirname "$0")/../.."

TARGETS=(//kernels/cuda:cuda_parity_test //comm:nccl_communicator_test //bench:gpu_bench
         //kernels/cuda:cuda_bench //kernels/cuda:device_wait_test
         //kernels/cuda:cuda_deterministic_test //kernels/cuda:attention_invariance_test
         //kernels/cuda:attention_layers_test //kernels/cuda/mixed_gemm:mixed_gemm_gpu_test
         //kernels/cuda:cuda_moe_test //kernels/cuda:fused_matmul_test
         //kernels/cuda:launch_cache_gpu_test //kernels/cuda:sampling_kernels_test)
OUT=gpu-bundle
LIMIT_MIB=48  # the device tool carries 64 MiB with the source tree

present=() missing=()
for t in "${TARGETS[@]}"; do
  if bazel query "$t" >/dev/null 2>&1; then present+=("$t"); else missing+=("$t"); fi
done
[[ ${#missing[@]} -gt 0 ]] && echo "build_bundle: not in this tree, left out: ${missing[*]}"
[[ ${#present[@]} -gt 0 ]] || { echo "build_bundle: nothing to build"; exit 1; }
# --dynamic_mode=off: tests link our own libraries statically, so only system libraries remain.
if ! bazel build -c opt --dynamic_mode=off --config=cuda "${present[@]}"; then
  echo "build_bundle: bazel build failed"
  exit 1
fi

rm -rf "$OUT"
mkdir -p "$OUT/bin" "$OUT/lib" "$OUT/lib-compat"
declare -A machine_provides=()
for t in "${present[@]}"; do
  pkg="${t#//}"; pkg="${pkg%%:*}"; name="${t##*:}"
  cp -L "bazel-bin/$pkg/$name" "$OUT/bin/$name"
  chmod u+w "$OUT/bin/$name"
  strip --strip-unneeded "$OUT/bin/$name"
  # Every library the dynamic loader resolves for it, sorted by where it must come from.
  while read -r soname path; do
    case "$soname" in
      linux-vdso.so*|ld-linux*|libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|libresolv.so*|libutil.so*)
        ;;  # glibc: the machine's own
      libcuda.so*|libnvidia-*)
        machine_provides["$soname"]="NVIDIA driver" ;;
      libcublasLt.so*|libcublas.so*|libnccl.so*)
        machine_provides["$soname"]="CUDA toolkit or pip nvidia-* wheels" ;;
      libstdc++.so*|libgcc_s.so*)
        [[ -e "$OUT/lib-compat/$soname" ]] || cp -L "$path" "$OUT/lib-compat/$soname" ;;
      *)
        if [[ "$path" == "not" || ! -e "$path" ]]; then
          echo "build_bundle: $name needs $soname, which is not found here"; exit 1
        fi
        [[ -e "$OUT/lib/$soname" ]] || cp -L "$path" "$OUT/lib/$soname" ;;
    esac
  done < <(ldd "bazel-bin/$pkg/$name" | awk '/=>/ {print $1, $3} !/=>/ {n = $1; sub(".*/", "", n); print n, $1}')
done
chmod -R u+w "$OUT"
strip --strip-unneeded "$OUT"/lib/*.so* "$OUT"/lib-compat/*.so* 2>/dev/null

glibc_max=$(objdump -T "$OUT"/bin/* "$OUT"/lib/*.so* 2>/dev/null | grep -o 'GLIBC_[0-9.]*' |
            sort -uV | tail -1)
glibcxx_max=$(objdump -T "$OUT"/bin/* "$OUT"/lib/*.so* 2>/dev/null | grep -o 'GLIBCXX_[0-9.]*' |
              sort -uV | tail -1)
# The CUDA binaries are mostly fatbins (sm_90a SASS, compute_90 PTX) that xz shrinks about
# 13 times (17 MB -> 1.3 MB each); device_checks.sh unpacks them there.
xz -9 -T0 -f "$OUT"/bin/*
{
  echo "gpu-bundle built $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname)"
  echo "commit: $(git rev-parse HEAD)$(git diff --quiet HEAD -- . ':!gpu-bundle' || echo ' (+ uncommitted changes)')"
  echo "bazel build -c opt --dynamic_mode=off --config=cuda ${present[*]}"
  echo "missing targets: ${missing[*]:-none}"
  echo "needs from the machine: glibc >= ${glibc_max#GLIBC_}, libstdc++ with ${glibcxx_max:-none} (else lib-compat/)"
  for s in "${!machine_provides[@]}"; do echo "needs from the machine: $s (${machine_provides[$s]})"; done | sort
  echo "files:"
  (cd "$OUT" && find . -type f ! -name MANIFEST.txt -printf '  %P %s\n' | sort)
} > "$OUT/MANIFEST.txt"
cat "$OUT/MANIFEST.txt"

bytes=$(du -sb "$OUT" | cut -f1)
tree_bytes=$(git ls-files -z | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)
echo "build_bundle: $OUT is $((bytes / 1024)) KiB ($(ls "$OUT/bin" | wc -l) binaries," \
     "$(ls "$OUT/lib" | wc -l) libraries); source tree $((tree_bytes / 1024)) KiB"
if (( bytes > LIMIT_MIB * 1024 * 1024 )); then
  echo "build_bundle: over the ${LIMIT_MIB} MiB budget"
  exit 1
fi
