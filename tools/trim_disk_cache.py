#!/usr/bin/env python3
"""Keeps a Bazel disk cache under a size bound by removing its least recently used entries.

    tools/trim_disk_cache.py --max_gb=40 ~/.cache/tpserve/bazel-disk

Bazel 4 has no bound of its own on --disk_cache. An entry's last use is the later of its
modification time (Bazel touches an entry it hits) and its access time. When the folder holds more
than --max_gb, entries go oldest first until it holds at most --low_water (default 0.8) of the
bound, so that a run does not trim again at once. Only Bazel's own layout is touched: the folder
must hold nothing but `ac/`, `cas/` and the temporary files Bazel writes an entry to before it
renames it into place (UUID names; one left by a killed build is removed after an hour);
anything else there (a model, a venv, a mistyped path such as ~/.cache itself) makes the script
refuse and remove nothing. scripts/bazel_cache.sh calls it; tests/ci/test_disk_cache.py tests it.
"""

import argparse
import os
import re
import sys
import time

CACHE_SUBDIRS = {"ac", "cas"}
TEMP_NAME = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
STALE_TEMP_S = 3600


def entries(root):
    """Every regular file under root's ac/ and cas/, as (last_use, size, path)."""
    found = []
    for sub in sorted(CACHE_SUBDIRS):
        top = os.path.join(root, sub)
        for dirpath, _, files in os.walk(top):
            for name in files:
                path = os.path.join(dirpath, name)
                try:
                    st = os.lstat(path)
                except FileNotFoundError:  # a concurrent build renamed or removed it
                    continue
                found.append((max(st.st_mtime, st.st_atime), st.st_size, path))
    return found


def check_layout(root):
    """None when root looks like a Bazel disk cache, else why not."""
    if not os.path.isdir(root):
        return f"{root} is not a directory"
    foreign = sorted(name for name in set(os.listdir(root)) - CACHE_SUBDIRS
                     if not TEMP_NAME.match(name))
    if foreign:
        return (f"{root} holds {', '.join(foreign[:5])}, which a Bazel disk cache does not "
                f"(only {', '.join(sorted(CACHE_SUBDIRS))}); refusing to trim it")
    return None


def trim(root, max_bytes, low_water=0.8):
    """Removes the oldest entries while root holds more than max_bytes. Returns
    (bytes before, bytes after, entries removed)."""
    now = time.time()
    for name in os.listdir(root):
        path = os.path.join(root, name)
        try:
            if TEMP_NAME.match(name) and now - os.lstat(path).st_mtime > STALE_TEMP_S:
                os.unlink(path)
        except FileNotFoundError:  # renamed into place meanwhile
            pass
    found = entries(root)
    total = sum(size for _, size, _ in found)
    before = total
    removed = 0
    if total <= max_bytes:
        return before, total, removed
    target = int(max_bytes * low_water)
    for _, size, path in sorted(found):
        if total <= target:
            break
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        total -= size
        removed += 1
    return before, total, removed


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cache_dir")
    parser.add_argument("--max_gb", type=float, required=True,
                        help="the bound, in GiB (2^30 bytes); 0 removes every entry")
    parser.add_argument("--low_water", type=float, default=0.8,
                        help="fraction of the bound to trim down to (default 0.8)")
    args = parser.parse_args(argv)
    if args.max_gb < 0:
        parser.error(f"--max_gb must be >= 0, got {args.max_gb}")
    if not 0 < args.low_water <= 1:
        parser.error(f"--low_water must be in (0, 1], got {args.low_water}")
    if not os.path.exists(args.cache_dir):
        return 0  # nothing cached yet
    problem = check_layout(args.cache_dir)
    if problem:
        print(f"trim_disk_cache: {problem}", file=sys.stderr)
        return 2
    before, after, removed = trim(args.cache_dir, int(args.max_gb * 2**30), args.low_water)
    if removed:
        print(f"trim_disk_cache: {args.cache_dir}: {before / 2**30:.1f} GiB over the bound of "
              f"{args.max_gb:g} GiB; removed {removed} least recently used entries, "
              f"{after / 2**30:.1f} GiB left", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
