"""The layers (docs/ARCHITECTURE.md, "Layers"; the order is tools/layers.bzl's) are enforced twice,
and each check can fail: tools/check_layers.py rejects an #include that reaches a higher layer,
and Bazel's visibility rejects a dependency on one (//worker:layering_probe depends on
//coordinator:engine on purpose). Run: python3 -m pytest -q tests/layering"""

import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
CHECKER = ROOT / "tools/check_layers.py"


def run_checker(*args):
    return subprocess.run([sys.executable, str(CHECKER), *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_no_include_in_the_repository_reaches_a_higher_layer():
    result = run_checker()
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no include reaches a higher layer" in result.stdout


def test_checker_reports_an_upward_include_with_both_layers(tmp_path):
    # Upward: the worker including the coordinator, and a peer of the top rank another's code.
    write(tmp_path / "worker/rank.cc", '#include "coordinator/engine.h"\n#include "model/config.h"\n')
    write(tmp_path / "bench/x.cc", '#include "deploy/loadgen.h"\n')
    # Allowed: downward, within a layer (sub-packages too), and infrastructure.
    write(tmp_path / "coordinator/engine.cc", '#include "worker/rank.h"\n#include "base/str_cat.h"\n')
    write(tmp_path / "kernels/cuda/a.cu", '#include "kernels/cpu/b.h"\n#include "third_party/c.h"\n')
    # Not read: Bazel's output symlinks and third_party.
    write(tmp_path / "bazel-out/worker/y.cc", '#include "coordinator/engine.h"\n')
    write(tmp_path / "third_party/z.h", '#include "coordinator/engine.h"\n')

    result = run_checker(str(tmp_path))

    assert result.returncode == 1, result.stdout + result.stderr
    lines = [l for l in result.stdout.splitlines() if ": includes " in l]
    assert lines == [
        'bench/x.cc: includes "deploy/loadgen.h" (layer bench below layer deploy)',
        'worker/rank.cc: includes "coordinator/engine.h" (layer worker below layer coordinator)',
    ]


def test_checker_passes_a_tree_without_upward_includes(tmp_path):
    write(tmp_path / "coordinator/engine.cc", '#include "worker/rank.h"\n')
    result = run_checker(str(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 source files" in result.stdout


@pytest.mark.skipif(shutil.which("bazel") is None, reason="bazel is not on PATH")
def test_bazel_rejects_a_dependency_on_a_higher_layer():
    # Analysis only (--nobuild): the visibility check fails before anything would compile.
    # Through scripts/bazel_cache.sh, as scripts/test.sh runs Bazel: the same startup options
    # reuse its server instead of restarting it.
    result = subprocess.run(
        ["bash", "-c", 'source scripts/bazel_cache.sh && bazel build --nobuild "$1"', "build",
         "//worker:layering_probe"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert ("target '//coordinator:engine' is not visible from target "
            "'//worker:layering_probe'") in output, output
