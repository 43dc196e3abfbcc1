#!/usr/bin/env python3
"""Where a Bazel invocation's time went, from the JSON profile it wrote with --profile.

    tools/compile_profile.py bazel-bep/asan.profile.gz [--top=25]

scripts/test.sh leaves one profile per pass in bazel-bep/ (main, asan, tsan). This prints the
action seconds by kind (compile, link, nvcc, test, other), by package (the directory of the
file compiled, or the target a genrule or test names; external repositories by name), and the
longest single actions. Action seconds are summed over the parallel jobs, so on a 2-core machine
they add up to about twice the wall time that they cover.
"""

import argparse
import collections
import gzip
import json
import re
import sys

KINDS = (
    ("compile", re.compile(r"^Compiling (\S+)")),
    ("nvcc", re.compile(r"^nvcc \S+ (//\S+)")),
    ("link", re.compile(r"^Linking (\S+)")),
    ("test", re.compile(r"^Testing (//\S+)")),
)


def package_of(what):
    if what.startswith("//"):
        return what[2:].split(":")[0] or "//"
    if what.startswith("external/"):
        return "@" + what.split("/")[1]
    what = re.sub(r"^bazel-out/[^/]+/bin/", "", what)
    parts = what.split("/")
    return "/".join(parts[:-1]) or "(root)"


def classify(name):
    for kind, pattern in KINDS:
        m = pattern.match(name)
        if m:
            return kind, m.group(1)
    return "other", name


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f)


def summarize(profile, top):
    events = profile["traceEvents"] if isinstance(profile, dict) else profile
    actions = [e for e in events
               if e.get("cat") == "action processing" and e.get("ph") == "X" and "dur" in e]
    if not actions:
        return "no action in this profile (was everything a cache hit?)\n"
    start = min(e["ts"] for e in actions)
    end = max(e["ts"] + e["dur"] for e in actions)
    by_kind = collections.Counter()
    count = collections.Counter()
    by_package = collections.Counter()
    rows = []
    for e in actions:
        seconds = e["dur"] / 1e6
        kind, what = classify(e["name"])
        by_kind[kind] += seconds
        count[kind] += 1
        if kind != "other":
            by_package[(kind, package_of(what))] += seconds
        rows.append((seconds, e["name"]))
    total = sum(by_kind.values())
    out = [f"actions from first start to last end: {(end - start) / 1e6:.0f} s; "
           f"action seconds: {total:.0f}"]
    out.append("\nby kind:")
    for kind, seconds in by_kind.most_common():
        out.append(f"  {kind:8s} {seconds:8.0f} s  {100 * seconds / total:3.0f}%  "
                   f"({count[kind]} actions)")
    out.append(f"\nby package (top {top}):")
    for (kind, package), seconds in by_package.most_common(top):
        out.append(f"  {seconds:8.0f} s  {kind:8s} {package}")
    out.append(f"\nlongest actions (top {top}):")
    for seconds, name in sorted(rows, reverse=True)[:top]:
        out.append(f"  {seconds:8.1f} s  {name}")
    return "\n".join(out) + "\n"


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("profile")
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args(argv)
    try:
        profile = load(args.profile)
    except (OSError, ValueError) as e:
        print(f"compile_profile: cannot read {args.profile}: {e}", file=sys.stderr)
        return 2
    sys.stdout.write(summarize(profile, args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
