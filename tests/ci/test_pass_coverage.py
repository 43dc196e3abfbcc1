"""Every test target runs in some pass of scripts/test.sh (docs/RELIABILITY.md, "What each pass
covers"). A new `*_test` target tagged `manual` and in no suite would otherwise run nowhere,
silently. Run: python3 -m pytest -q tests/ci/test_pass_coverage.py

The passes, as scripts/test.sh runs them (test_test_sh_runs_the_passes_modelled_here checks that
it still does):
  main  `bazel test //...`: every test not tagged manual;
  asan  `--config=nocuda --config=asan --test_tag_filters=-no-sanitizer` over every package:
        every test not tagged manual or no-sanitizer that exists without the CUDA toolkit;
  tsan  `//tools/tsan:tsan_suite`.
"""

import pathlib
import re
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
TEST_SH = ROOT / "scripts/test.sh"


def passes_of(tests, manual, no_sanitizer, tsan_suite):
    """{test: [pass, ...]} for every test label in `tests`."""
    passes = {}
    for test in tests:
        runs = []
        if test not in manual:
            runs.append("main")
            if test not in no_sanitizer:
                runs.append("asan")
        if test in tsan_suite:
            runs.append("tsan")
        passes[test] = runs
    return passes


def uncovered(passes):
    return sorted(test for test, runs in passes.items() if not runs)


def test_a_manual_test_outside_the_tsan_suite_is_in_no_pass():
    passes = passes_of(tests={"//a:x_test", "//a:y_test", "//a:z_test", "//a:w_test"},
                       manual={"//a:y_test", "//a:z_test"}, no_sanitizer={"//a:w_test"},
                       tsan_suite={"//a:z_test"})
    assert passes["//a:x_test"] == ["main", "asan"]
    assert passes["//a:w_test"] == ["main"]
    assert passes["//a:z_test"] == ["tsan"]
    assert uncovered(passes) == ["//a:y_test"]


def bazel_query(expression):
    # Through scripts/bazel_cache.sh, as scripts/test.sh runs Bazel: the same startup options
    # reuse its server instead of restarting it.
    result = subprocess.run(
        ["bash", "-c", 'source scripts/bazel_cache.sh && bazel query "$1"', "query", expression],
        cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-4000:]
    return {line for line in result.stdout.split() if line.startswith("//")}


def test_test_sh_runs_the_passes_modelled_here():
    script = TEST_SH.read_text()
    assert re.search(r"^bazel test .*//\.\.\. \"\$@\"$", script.replace("\\\n", " "), re.M), \
        "the main pass is no longer `bazel test //...`"
    assert "extra_pass asan --config=nocuda --config=asan --build_tests_only " \
           "--test_tag_filters=-no-sanitizer $packages" in script
    assert "extra_pass tsan --config=nocuda --config=tsan //tools/tsan:tsan_suite" in script


@pytest.mark.skipif(shutil.which("bazel") is None, reason="bazel is not on PATH")
def test_every_test_target_runs_in_a_pass():
    tests_expr = 'kind(".*_test rule", //...)'
    tests = bazel_query(tests_expr)
    manual = bazel_query(f'attr(tags, "\\bmanual\\b", {tests_expr})')
    no_sanitizer = bazel_query(f'attr(tags, "\\bno-sanitizer\\b", {tests_expr})')
    tsan_suite = bazel_query("tests(//tools/tsan:tsan_suite)")
    assert len(tests) > 100 and tsan_suite and manual < tests
    missing = uncovered(passes_of(tests, manual, no_sanitizer, tsan_suite))
    assert not missing, (
        f"{len(missing)} test targets run in no pass of scripts/test.sh: {missing}. Drop their "
        "`manual` tag, or add them to a pass (docs/RELIABILITY.md, \"What each pass covers\")")
    # The TSan suite names tests that exist (a typo would make query fail above).
    assert tsan_suite <= tests
