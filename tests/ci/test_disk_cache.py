"""The shared Bazel disk cache (scripts/bazel_cache.sh) and its bound (tools/trim_disk_cache.py).

A corrupt or partial cache entry must cost a rebuild of one action, never the build: a tiny
workspace is built through the scripts' own `bazel` function (HOME in a temp dir, so the cache is
a fresh one), then built again in a new output base after its entries are truncated.
Run: python3 -m pytest -q tests/ci/test_disk_cache.py
"""

import os
import pathlib
import shutil
import subprocess
import sys
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
TRIM = ROOT / "tools/trim_disk_cache.py"

BUILD = """
cc_library(name = "greeting", srcs = ["greeting.cc"], hdrs = ["greeting.h"])
cc_binary(name = "hello", srcs = ["hello.cc"], deps = [":greeting"])
"""
FILES = {
    "greeting.h": "const char* Greeting();\n",
    "greeting.cc": '#include "greeting.h"\nconst char* Greeting() { return "cached hello"; }\n',
    "hello.cc": '#include <cstdio>\n#include "greeting.h"\nint main() { std::puts(Greeting()); }\n',
}


def write_workspace(ws):
    ws.mkdir()
    # The offline shims of the real WORKSPACE (Debian's Bazel would download these otherwise).
    shutil.copytree(ROOT / "third_party", ws / "third_party",
                    ignore=shutil.ignore_patterns("system"))
    (ws / "WORKSPACE").write_text("\n".join(
        line for line in (ROOT / "WORKSPACE").read_text().splitlines()
        if line.startswith("workspace(") or line.startswith("local_repository(")) + "\n")
    (ws / ".bazelrc").write_text("build --nosandbox_debug\n")
    (ws / "BUILD").write_text(BUILD)
    for name, text in FILES.items():
        (ws / name).write_text(text)


class Builder:
    """Builds //:hello in `ws` through scripts/bazel_cache.sh with HOME=`home`."""

    def __init__(self, ws, home):
        self.ws, self.home, self.bases = ws, home, []

    def bazel(self, base, command):
        """`bazel --output_base=base command` as the scripts run it, with HOME=`home`."""
        env = dict(os.environ, HOME=str(self.home))
        for name in ("TPSERVE_BAZEL_DISK_CACHE", "TPSERVE_BAZEL_REPO_CACHE"):
            env.pop(name, None)
        return subprocess.run(
            ["bash", "-c", f'source "{ROOT}/scripts/bazel_cache.sh" && '
             f'bazel --output_base="{base}" {command}'],
            cwd=self.ws, env=env, capture_output=True, text=True, timeout=600)

    def build(self):
        base = self.home / f"output-base-{len(self.bases)}"  # a fresh one: nothing local
        self.bases.append(base)
        return self.bazel(base, "build //:hello")

    def run_hello(self):
        binary = self.ws / "bazel-bin/hello"
        return subprocess.run([str(binary)], capture_output=True, text=True, timeout=60).stdout

    def shutdown(self):
        # With the startup options each server was started with, so none is restarted to stop.
        for base in self.bases:
            self.bazel(base, "shutdown")


@pytest.fixture
def builder(tmp_path):
    ws = tmp_path / "ws"
    write_workspace(ws)
    home = tmp_path / "home"
    home.mkdir()
    b = Builder(ws, home)
    yield b
    b.shutdown()


def cache_files(home, sub):
    """The entries (files) under the disk cache's ac/ or cas/."""
    return sorted(f for f in (home / ".cache/tpserve/bazel-disk" / sub).rglob("*") if f.is_file())


def truncate(files, fraction):
    for f in files:
        os.truncate(f, int(f.stat().st_size * fraction))


@pytest.mark.skipif(shutil.which("bazel") is None, reason="bazel is not on PATH")
def test_a_truncated_entry_is_rebuilt_not_a_failed_build(builder):
    first = builder.build()
    assert first.returncode == 0, first.stderr[-4000:]
    assert builder.run_hello() == "cached hello\n"
    cas = cache_files(builder.home, "cas")
    ac = cache_files(builder.home, "ac")
    assert cas and ac, "the build wrote nothing to ~/.cache/tpserve/bazel-disk"
    assert (builder.home / ".cache/tpserve/bazel-repo").is_dir()

    # Intact, the cache serves a new output base: every action is a hit.
    hit = builder.build()
    assert hit.returncode == 0, hit.stderr[-4000:]
    assert "remote cache hit" in hit.stderr and "linux-sandbox" not in hit.stderr, hit.stderr

    # Every stored output cut in half: each read is checked against its digest and fails, and
    # the action runs again.
    truncate(cas, 0.5)
    partial = builder.build()
    assert partial.returncode == 0, partial.stderr[-4000:]
    assert "does not match" in partial.stderr, partial.stderr[-4000:]
    assert builder.run_hello() == "cached hello\n"

    # Every action result cut in half, and every output emptied: the results do not parse.
    truncate(cache_files(builder.home, "ac"), 0.5)
    truncate(cache_files(builder.home, "cas"), 0.0)
    broken = builder.build()
    assert broken.returncode == 0, broken.stderr[-4000:]
    assert builder.run_hello() == "cached hello\n"


def make_cache(root, sizes_and_ages):
    """Files of the given sizes under root/cas, each `age` seconds old; returns their paths."""
    now = time.time()
    paths = []
    for i, (size, age) in enumerate(sizes_and_ages):
        sub = root / ("cas" if i % 2 else "ac") / f"{i:02x}"
        sub.mkdir(parents=True, exist_ok=True)
        path = sub / f"{i:064x}"
        path.write_bytes(b"x" * size)
        os.utime(path, (now - age, now - age))
        paths.append(path)
    return paths


def trim(cache, max_gb, *extra):
    return subprocess.run([sys.executable, str(TRIM), f"--max_gb={max_gb}", *extra, str(cache)],
                          capture_output=True, text=True, timeout=60)


def test_trim_removes_the_least_recently_used_entries_down_to_the_low_water_mark(tmp_path):
    cache = tmp_path / "bazel-disk"
    # Ten 100 KiB entries, the first the oldest.
    paths = make_cache(cache, [(100 * 1024, 1000 - 10 * i) for i in range(10)])
    model = tmp_path / "model.gguf"
    model.write_bytes(b"m" * 300 * 1024)
    os.utime(model, (0, 0))  # older than every entry: still not the trimmer's to remove
    bound_gb = 800 * 1024 / 2**30  # 800 KiB: 1000 KiB is over; 0.8 of it is 640 KiB
    result = trim(cache, bound_gb)
    assert result.returncode == 0, result.stderr
    kept = [p.exists() for p in paths]
    assert kept == [False] * 4 + [True] * 6, kept  # 600 KiB left, the newest six
    assert model.exists()
    assert "removed 4 least recently used entries" in result.stderr

    # Under the bound: nothing to do, nothing said.
    again = trim(cache, bound_gb)
    assert again.returncode == 0 and again.stderr == ""
    assert all(p.exists() for p in paths[4:])


def test_trim_counts_a_hit_as_a_use(tmp_path):
    cache = tmp_path / "bazel-disk"
    paths = make_cache(cache, [(1024, 500), (1024, 400), (1024, 300)])
    now = time.time()
    os.utime(paths[0], (now, now))  # Bazel touches an entry it serves
    result = trim(cache, 2048 / 2**30, "--low_water=1")
    assert result.returncode == 0, result.stderr
    assert [p.exists() for p in paths] == [True, False, True]


def test_trim_refuses_a_folder_that_is_not_a_disk_cache(tmp_path):
    cache = tmp_path / "tpserve"
    paths = make_cache(cache, [(4096, 100), (4096, 50)])
    (cache / "SmolLM2-135M-Instruct.Q4_1.gguf").write_bytes(b"m" * 4096)
    result = trim(cache, 0)
    assert result.returncode == 2
    assert "SmolLM2-135M-Instruct.Q4_1.gguf" in result.stderr and "refusing" in result.stderr
    assert all(p.exists() for p in paths)

    bad = trim(cache, -1)
    assert bad.returncode == 2 and "--max_gb must be >= 0, got -1.0" in bad.stderr


def test_trim_removes_a_stale_temporary_file_and_keeps_a_fresh_one(tmp_path):
    cache = tmp_path / "bazel-disk"
    make_cache(cache, [(16, 10)])
    stale = cache / "0f8fad5b-d9cb-469f-a165-70867728950e"
    fresh = cache / "7c9e6679-7425-40de-944b-e07fc1f90ae7"
    for f, age in ((stale, 7200), (fresh, 10)):
        f.write_bytes(b"partial")
        os.utime(f, (time.time() - age, time.time() - age))
    result = trim(cache, 1)
    assert result.returncode == 0, result.stderr
    assert not stale.exists() and fresh.exists()


def test_the_rc_names_this_homes_caches(tmp_path):
    result = subprocess.run(
        ["bash", "-c", f'source "{ROOT}/scripts/bazel_cache.sh" && cat "$(tpserve_bazelrc)"'],
        env=dict(os.environ, HOME=str(tmp_path)), capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert f"build --disk_cache={tmp_path}/.cache/tpserve/bazel-disk\n" in result.stdout
    assert f"build --repository_cache={tmp_path}/.cache/tpserve/bazel-repo\n" in result.stdout
    assert f"try-import {tmp_path}/.bazelrc\n" in result.stdout


def test_a_refused_trim_warns_and_does_not_stop_the_script(tmp_path):
    foreign = tmp_path / "not-a-cache"
    (foreign / "venv").mkdir(parents=True)
    result = subprocess.run(
        ["bash", "-c", f'set -e; source "{ROOT}/scripts/bazel_cache.sh"; tpserve_trim_disk_cache; '
         'echo went-on'],
        env=dict(os.environ, HOME=str(tmp_path), TPSERVE_BAZEL_DISK_CACHE=str(foreign)),
        capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and result.stdout == "went-on\n", result.stderr
    assert f"bazel_cache: {foreign} was not trimmed" in result.stderr
    assert (foreign / "venv").is_dir()
