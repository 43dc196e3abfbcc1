"""Repository rule exposing a locally installed CUDA toolkit as @cuda."""

def _cuda_configure_impl(rctx):
    cuda = rctx.os.environ.get("CUDA_PATH", "/usr/local/cuda")
    if not rctx.path(cuda + "/bin/nvcc").exists:
        fail("nvcc not found under CUDA_PATH=%s" % cuda)
    for d in ["bin", "include", "lib64", "nvvm"]:
        rctx.symlink(cuda + "/" + d, d)
    # nvcc.profile resolves headers as $(dirname argv[0])/../targets/x86_64-linux/include, and
    # inside the sandbox argv[0] is external/cuda/bin/nvcc, so mirror that layout here.
    rctx.symlink(cuda + "/include", "targets/x86_64-linux/include")
    rctx.symlink(rctx.attr.build_file, "BUILD.bazel")

cuda_configure = repository_rule(
    implementation = _cuda_configure_impl,
    attrs = {"build_file": attr.label(default = "//tools:cuda.BUILD")},
    environ = ["CUDA_PATH"],
    local = True,
)
