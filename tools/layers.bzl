"""The layers of tpserve, bottom first, and the Bazel visibility that enforces them.

A top-level package (with all its sub-packages) may use the packages of its own layer and of the
layers below it, never one above. Each layer's BUILD files say
    load("//tools:layers.bzl", "layer_visibility")
    package(default_visibility = layer_visibility("worker"))
so that a target is visible only to its own layer and the layers above it: a dependency that
points upward fails at analysis ("... is not visible from target ..."). tools/check_layers.py
reads LAYERS below and checks the #include lines the same way. docs/ARCHITECTURE.md ("Layers")
says what each layer holds.
"""

# Bottom first. A list in place of a name is one rank of peers: each of them may use every layer
# below, none may use another's code. tools/ and third_party/ are infrastructure, not layers.
LAYERS = [
    "base",
    "proto",
    "formats",
    "kernels",
    "model",
    "checkpoint",
    "planner",
    "comm",
    "step",
    "cluster",
    "worker",
    "coordinator",
    ["deploy", "bench", "fuzz", "tests"],
]

def _ranks():
    return [[r] if type(r) == "string" else r for r in LAYERS]

def layer_visibility(layer):
    """Returns the visibility list for the packages of `layer`: the layer itself and every layer
    above it, plus //tools/... (the ThreadSanitizer suite, //tools/tsan:tsan_suite, names tests
    of every layer)."""
    ranks = _ranks()
    for i, rank in enumerate(ranks):
        if layer in rank:
            visible = [layer]
            for above in ranks[i + 1:]:
                visible.extend(above)
            return ["//%s:__subpackages__" % name for name in visible] + ["//tools:__subpackages__"]
    fail("layer_visibility: %r is not a layer in tools/layers.bzl" % layer)
