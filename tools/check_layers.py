#!/usr/bin/env python3
"""Checks that every top-level package includes only packages at or below its own layer.

Usage: python3 tools/check_layers.py [ROOT]   (ROOT defaults to the repository root)

Each .h/.cc/.cu/.cuh file belongs to the layer of its top-level directory (kernels/cuda/x.cu is
in "kernels"). An `#include "dir/..."` whose top-level directory is a layer ABOVE the includer's
is a violation. The layer order is the one in tools/layers.bzl (read from there, so the two
cannot drift apart). Exit 0 with a one-line summary when there is none; exit 1 listing each as
  path: includes "x" (layer A below layer B)
Directories that are not layers (tools/, third_party/, bazel-* symlinks, gpu-bundle/) are not
checked, and including them is allowed from everywhere.
"""
import ast
import os
import re
import sys

SOURCE_SUFFIXES = (".h", ".cc", ".cu", ".cuh")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)
SKIPPED_DIRS = {"third_party", "gpu-bundle", ".git"}


def read_layers(layers_bzl):
    """Returns the top-level layers, bottom first, as a list of lists: a list is one rank
    (the top rank holds deploy, bench, fuzz, tests and tools' peers, which may not use each
    other's code but are all above coordinator). Reads `LAYERS = [...]` from tools/layers.bzl."""
    with open(layers_bzl) as f:
        text = f.read()
    match = re.search(r"^LAYERS\s*=\s*(\[.*?^\])", text, re.MULTILINE | re.DOTALL)
    if not match:
        sys.exit(f"{layers_bzl}: no LAYERS = [...] list")
    ranks = ast.literal_eval(match.group(1))
    return [[r] if isinstance(r, str) else list(r) for r in ranks]


def rank_of(ranks):
    """Maps each layer name to its rank (0 = bottom)."""
    return {name: i for i, rank in enumerate(ranks) for name in rank}


def source_files(root):
    for top in sorted(os.listdir(root)):
        if top.startswith("bazel-") or top in SKIPPED_DIRS:
            continue
        path = os.path.join(root, top)
        if not os.path.isdir(path) or os.path.islink(path):
            continue
        for dirpath, dirnames, filenames in os.walk(path):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("bazel-"))
            for name in sorted(filenames):
                if name.endswith(SOURCE_SUFFIXES):
                    yield os.path.relpath(os.path.join(dirpath, name), root)


def violations(root, ranks):
    """Yields (path, include, includer_layer, included_layer) for every upward include."""
    rank = rank_of(ranks)
    for path in source_files(root):
        layer = path.split(os.sep)[0]
        if layer not in rank:
            continue  # tools/ and other infrastructure: not a layer
        with open(os.path.join(root, path), errors="replace") as f:
            text = f.read()
        for include in INCLUDE.findall(text):
            target = include.split("/")[0]
            if "/" not in include or target not in rank or target == layer:
                continue
            if rank[target] >= rank[layer]:
                yield path, include, layer, target


def main(argv):
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.abspath(argv[1]) if len(argv) > 1 else os.path.dirname(here)
    ranks = read_layers(os.path.join(here, "layers.bzl"))
    found = list(violations(root, ranks))
    for path, include, layer, target in found:
        print(f'{path}: includes "{include}" (layer {layer} below layer {target})')
    if found:
        print(f"{len(found)} upward include(s); the order, bottom first: "
              + " < ".join("{" + ", ".join(r) + "}" if len(r) > 1 else r[0] for r in ranks))
        return 1
    files = sum(1 for _ in source_files(root))
    print(f"check_layers: {files} source files under {root}, no include reaches a higher layer")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
