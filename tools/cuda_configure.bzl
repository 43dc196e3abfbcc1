"""Repository rule exposing a locally installed CUDA toolkit as @cuda, or a stub without one.

With nvcc under $CUDA_PATH (default /usr/local/cuda) the repository symlinks the toolkit and its
defs.bzl says CUDA_AVAILABLE = True; otherwise every @cuda target is an empty library and
CUDA_AVAILABLE = False, so the CPU build needs no toolkit (tools/cuda.bzl then skips the GPU
targets). TPSERVE_REQUIRE_CUDA=1 (bazel build --config=cuda) turns a missing toolkit into an
error instead."""

def _cuda_configure_impl(rctx):
    cuda = rctx.os.environ.get("CUDA_PATH", "/usr/local/cuda")
    found = rctx.path(cuda + "/bin/nvcc").exists
    if not found and rctx.os.environ.get("TPSERVE_REQUIRE_CUDA", "0") == "1":
        fail("--config=cuda: nvcc not found under CUDA_PATH=%s" % cuda)
    if found:
        for d in ["bin", "include", "lib64", "nvvm"]:
            rctx.symlink(cuda + "/" + d, d)

        # nvcc.profile resolves headers as $(dirname argv[0])/../targets/x86_64-linux/include,
        # and inside the sandbox argv[0] is external/cuda/bin/nvcc, so mirror that layout here.
        rctx.symlink(cuda + "/include", "targets/x86_64-linux/include")
        rctx.symlink(rctx.attr.build_file, "BUILD.bazel")
    else:
        rctx.symlink(rctx.attr.stub_build_file, "BUILD.bazel")
    rctx.file("defs.bzl", "CUDA_AVAILABLE = %s\nCUDA_PATH = %r\n" % (found, cuda))

cuda_configure = repository_rule(
    implementation = _cuda_configure_impl,
    attrs = {
        "build_file": attr.label(default = "//tools:cuda.BUILD"),
        "stub_build_file": attr.label(default = "//tools:cuda_stub.BUILD"),
    },
    environ = ["CUDA_PATH", "TPSERVE_REQUIRE_CUDA"],
    local = True,
)
