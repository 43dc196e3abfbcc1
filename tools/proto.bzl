"""Proto + gRPC C++ codegen with the system protoc / grpc_cpp_plugin (no @com_google_protobuf)."""

def cc_grpc_proto_library(name, srcs, deps = [], grpc = True, visibility = None, **kwargs):
    """srcs: .proto files in this package. deps: other cc_grpc_proto_library targets.

    Generated files land in $(GENDIR)/<package>/x.pb.{h,cc}; C++ includes them as
    "<package>/x.pb.h" (Bazel already passes -iquote bazel-out/<cfg>/bin).
    Imports are workspace-relative ("proto/common/meta.proto"); well-known types
    (google/protobuf/*.proto) come from /usr/include via protoc's default path.
    """
    hdrs = []
    cc_srcs = []
    for s in srcs:
        base = s[:-len(".proto")]
        hdrs.append(base + ".pb.h")
        cc_srcs.append(base + ".pb.cc")
        if grpc:
            hdrs.append(base + ".grpc.pb.h")
            cc_srcs.append(base + ".grpc.pb.cc")

    # Transitive .proto files, so protoc can read imports inside the sandbox.
    native.filegroup(
        name = name + "_protos",
        srcs = srcs + [d + "_protos" for d in deps],
        visibility = visibility,
    )
    cmd = "protoc -I. --cpp_out=$(GENDIR)"
    if grpc:
        cmd += " --grpc_out=$(GENDIR) --plugin=protoc-gen-grpc=$$(command -v grpc_cpp_plugin)"
    cmd += " " + " ".join(["$(location %s)" % s for s in srcs])
    native.genrule(
        name = name + "_codegen",
        srcs = srcs + [d + "_protos" for d in deps],
        outs = hdrs + cc_srcs,
        cmd = cmd,
        message = "protoc %s" % " ".join(srcs),
        visibility = ["//visibility:private"],
    )
    native.cc_library(
        name = name,
        srcs = cc_srcs,
        hdrs = hdrs,
        deps = deps + ["//third_party/system:grpc++" if grpc else "//third_party/system:protobuf"],
        visibility = visibility,
        **kwargs
    )
