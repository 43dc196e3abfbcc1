"""CUDA in Bazel, optional: cuda_library compiles .cu files with nvcc (one genrule per file) and
wraps the objects in a cc_library; cuda_cc_library and cuda_cc_test are plain C++ targets that
include CUDA headers. In a build without the toolkit (@cuda's CUDA_AVAILABLE is False) the
libraries are empty and the tests do not exist, so `bazel build //...` needs no CUDA; code that
can run either way checks the TPSERVE_WITH_CUDA define that if_cuda() sets."""

load("@cuda//:defs.bzl", "CUDA_AVAILABLE")

def if_cuda(with_cuda, without_cuda = []):
    """`with_cuda` in builds that have the CUDA toolkit, else `without_cuda`."""
    return with_cuda if CUDA_AVAILABLE else without_cuda

# local_defines for code with an optional CUDA path.
CUDA_DEFINES = ["TPSERVE_WITH_CUDA=1"] if CUDA_AVAILABLE else ["TPSERVE_WITH_CUDA=0"]

def cuda_cc_library(name, **kwargs):
    """A cc_library that needs CUDA headers or libraries; empty without the toolkit."""
    if CUDA_AVAILABLE:
        native.cc_library(name = name, **kwargs)
    else:
        native.cc_library(name = name, visibility = kwargs.get("visibility"))

def cuda_cc_test(name, **kwargs):
    """A cc_test of CUDA code; absent without the toolkit (nothing to test)."""
    if CUDA_AVAILABLE:
        native.cc_test(name = name, **kwargs)

def cuda_cc_binary(name, **kwargs):
    """A cc_binary of CUDA code; absent without the toolkit."""
    if CUDA_AVAILABLE:
        native.cc_binary(name = name, **kwargs)

CUDA_GENCODE = [
    # H100/H200 SASS (sm_90a runs on every compute capability 9.0 GPU, so a plain sm_90 cubin
    # would be a second copy of the same code), and PTX that newer GPUs JIT-compile.
    "-gencode=arch=compute_90a,code=sm_90a",
    "-gencode=arch=compute_90,code=compute_90",
]

NVCC_DEFAULT_COPTS = [
    "-std=c++20",  # OK with nvcc 13.0 + g++ 12.2
    "-O3",
    "-Xcompiler=-fPIC",
    "--expt-relaxed-constexpr",
    "-ccbin=g++",  # found via PATH (=/bin:/usr/bin:/usr/local/bin with --incompatible_strict_action_env)
]

# Kernels built on FlashInfer / CUTLASS headers (@flashinfer, see WORKSPACE): Hopper SASS only
# (their sm90 code paths need sm_90a; one target instead of three keeps the cold build within
# CI's budget), the wheel's CCCL ahead of the toolkit's (nvcc.profile adds the toolkit's as
# -isystem, so -I wins), and the flags FlashInfer's own JIT build uses (flashinfer/jit/core.py
# and cpp_ext.py of the same wheel), less -use_fast_math (our kernels keep IEEE division) and
# less CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED: its 76,000 lines of extra wgmma shapes cost ~40 s
# of nvcc per CuTe file, and every tile we instantiate (FA3 96-wide KV tiles, head dims 64/128,
# the mixed GEMM's 16- and 128-token tiles) is one of CuTe's base shapes, which the op
# selectors pick first either way.
FLASHINFER_GENCODE = ["-gencode=arch=compute_90a,code=sm_90a"]

FLASHINFER_NVCC_COPTS = [
    "-Iexternal/flashinfer/cccl/libcudacxx/include",
    "-Iexternal/flashinfer/cccl/cub",
    "-Iexternal/flashinfer/cccl/thrust",
    "-Iexternal/flashinfer/include",
    "-Iexternal/flashinfer/cutlass/include",
    "-Iexternal/flashinfer/cutlass/tools/util/include",
    "-DNDEBUG",
    "-DFLASHINFER_ENABLE_BF16",
    "-DFLASHINFER_ENABLE_F16",
    "-DFLASHINFER_ENABLE_FP8_E4M3",
    # CUDA >= 12.8 makes template kernel stubs static by default; FlashInfer's JIT turns it off.
    "-static-global-template-stub=false",
    # CUTLASS's sm100 headers (included, never instantiated here) warn about deprecated
    # implicit captures and ignored annotations, and FlashInfer's sm90 epilogue calls a
    # deprecated CuTe copy_if; nothing of ours is silenced by these.
    "-diag-suppress=1444,2908,20012",
]

FLASHINFER_NVCC_INPUTS = ["@flashinfer//:nvcc_inputs"]

def cuda_library(
        name,
        srcs,
        hdrs = [],
        deps = [],
        nvcc_copts = [],
        nvcc_inputs = [],
        gencode = CUDA_GENCODE,
        visibility = None,
        **kwargs):
    """srcs: .cu files (nvcc) and optionally .cc/.h (plain C++, compiled by Bazel's g++).
    hdrs: public headers (should be plain C++ so non-CUDA targets can include them).
    nvcc_inputs: extra files nvcc may #include (a genrule cannot see headers of cc deps).
    Without the toolkit: an empty cc_library.
    """
    if not CUDA_AVAILABLE:
        native.cc_library(name = name, visibility = visibility)
        return
    cu_srcs = [s for s in srcs if s.endswith(".cu")]
    other_srcs = [s for s in srcs if not s.endswith(".cu")]
    cu_hdrs = [s for s in hdrs + other_srcs if s.endswith((".h", ".cuh", ".hpp"))]
    objs = []
    for src in cu_srcs:
        stem = src[:-len(".cu")]

        # The ".pic.o" suffix tells cc_library these are PIC objects; they are then used for
        # both link modes (static cc_binary and dynamic cc_test, linkstatic=0).
        obj = "_nvcc/%s/%s.pic.o" % (name, stem)
        native.genrule(
            name = "%s_nvcc_%s" % (name, stem.replace("/", "_")),
            srcs = [src] + cu_hdrs + nvcc_inputs,
            outs = [obj],
            # nvcc + cudafe++/ptxas/fatbinary/cicc + the headers nvcc.profile points at.
            tools = ["@cuda//:nvcc"],
            cmd = " ".join(
                ["external/cuda/bin/nvcc"] + NVCC_DEFAULT_COPTS + gencode + nvcc_copts +
                ["-I.", "-I$(GENDIR)", "-c $(location %s)" % src, "-o $@"],
            ),
            message = "nvcc %s" % src,
            visibility = ["//visibility:private"],
        )
        objs.append(obj)
    native.cc_library(
        name = name,
        srcs = objs + other_srcs,
        hdrs = hdrs,
        deps = deps + ["@cuda//:cudart"],
        visibility = visibility,
        **kwargs
    )
