"""cuda_library: compile .cu files with nvcc (one genrule per file) and wrap the objects in a
cc_library, so plain cc_library/cc_binary/cc_test targets can depend on it."""

CUDA_GENCODE = [
    "-gencode=arch=compute_90a,code=sm_90a",  # H100/H200 SASS incl. arch-specific (wgmma/TMA) features
    "-gencode=arch=compute_90,code=sm_90",  # portable sm_90 SASS
    "-gencode=arch=compute_90,code=compute_90",  # PTX fallback, JIT-compiled on newer GPUs
]

NVCC_DEFAULT_COPTS = [
    "-std=c++20",  # OK with nvcc 13.0 + g++ 12.2
    "-O3",
    "-Xcompiler=-fPIC",
    "--expt-relaxed-constexpr",
    "-ccbin=g++",  # found via PATH (=/bin:/usr/bin:/usr/local/bin with --incompatible_strict_action_env)
]

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
    """
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
