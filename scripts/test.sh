#!/usr/bin/env bash
# Runs the whole test suite after set-up, and ends with one line "N passed, N failed"
# counting test cases from the JUnit XML that Bazel writes for every test target. Which XML
# belongs to this run is read from each Bazel invocation's build event file (bazel-bep/), so
# reports an output base keeps from earlier runs (other targets, --runs_per_test) never count.
#
# Every Bazel invocation shares one disk cache (scripts/bazel_cache.sh), so a fresh clone on a
# machine that has built the tree before compiles only what changed; test results are never
# taken from it. Each pass's wall time and share of the whole is printed at the end, above the
# count, and each Bazel pass leaves its profile in bazel-bep/<pass>.profile.gz
# (tools/compile_profile.py lists the slowest actions and targets from one).
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/bazel_cache.sh

pass_names=()
pass_seconds=()
pass_started=$SECONDS
# pass_done NAME: the time since the previous pass ended is NAME's.
pass_done() {
  pass_names+=("$1")
  pass_seconds+=($((SECONDS - pass_started)))
  pass_started=$SECONDS
}

bash scripts/setup.sh --test || exit 1
export TPSERVE_MODEL_DIR="${TPSERVE_MODEL_DIR:-$HOME/.cache/tpserve}"
# JSONSchemaBench's schemas (not in the repository; //tests/structured:jsonschemabench_test skips
# without them): beside the checkout as the project's machines have it, or where they are.
if [ -z "${TPSERVE_JSONSCHEMABENCH_DIR:-}" ]; then
  for d in ../shared/jsonschemabench /work/shared/jsonschemabench; do
    [ -d "$d" ] && { TPSERVE_JSONSCHEMABENCH_DIR="$(cd "$d" && pwd)"; break; }
  done
fi
export TPSERVE_JSONSCHEMABENCH_DIR="${TPSERVE_JSONSCHEMABENCH_DIR:-}"
tpserve_trim_disk_cache
pass_done setup

rm -rf bazel-bep && mkdir -p bazel-bep
bazel test --build_event_json_file="$PWD/bazel-bep/main.json" \
  --profile="$PWD/bazel-bep/main.profile.gz" //... "$@"
rc=$?
pass_done main

# End-to-end: real launcher and worker processes, driven from Python gRPC; the reference
# packers of quantized checkpoints (Python, from the public specifications); and the deployment
# files (deploy/Dockerfile, deploy/k8s, deploy/slurm) against the programs' real flags.
# And the soak's short version (tests/soak/test_soak_short.py; soak.py itself is the long run),
# and the layering checks (tests/layering: no include or Bazel dependency reaches a higher layer),
# and the capacity report drawn by //deploy:vram and rendered in headless Chromium (tests/report),
# and the checks of CI itself (tests/ci: every test target is in some pass; the disk cache
# survives truncated entries; its trimming), and the GPU run's own script over a faked machine
# (tests/gpu: no check that did not run passes silently).
rm -rf bazel-e2e-report && mkdir -p bazel-e2e-report
if bazel build //deploy:launch //deploy:client //deploy:vram //worker:worker; then
  python3 -m pytest -q tests/e2e tests/golden/quant tests/deploy tests/soak tests/layering \
    tests/structured tests/report tests/ci tests/gpu --durations=15 \
    --junitxml=bazel-e2e-report/test.xml || rc=1
else
  rc=1
  echo '<testsuite><testcase name="e2e-build"><failure/></testcase></testsuite>' > bazel-e2e-report/test.xml
fi
pass_done e2e

# Further passes, each in an output base of its own so that they do not evict each other
# (docs/RELIABILITY.md). Their test reports are counted with the rest. The output bases default
# to ~/.cache/tpserve-bazel-<name>; TPSERVE_SKIP_<NAME>=1 skips one (a quicker local run).
# Not //...: the first build's convenience symlink bazel-<this directory's name> points into its
# output base, which that build skips but another output base would descend into (and fail on
# bazel_tools' packages). So every top-level package tree git knows, by name.
packages=$(git ls-files | grep -E '(^|/)BUILD(\.bazel)?$' |
           awk -F/ '{ print (NF == 1 ? "//:all" : "//" $1 "/...") }' | sort -u)
# extra_pass NAME BAZEL-TEST-ARGS...
extra_pass() {
  local name=$1 skip base
  shift
  skip="TPSERVE_SKIP_$(tr '[:lower:]' '[:upper:]' <<<"$name")"
  [ "${!skip:-0}" = "1" ] && { echo "test.sh: $skip=1, skipping the $name pass"; pass_done "$name"; return; }
  base="$HOME/.cache/tpserve-bazel-$name"
  echo "test.sh: the $name pass: bazel test $*"
  bazel --output_base="$base" test --symlink_prefix=/ \
    --build_event_json_file="$PWD/bazel-bep/$name.json" \
    --profile="$PWD/bazel-bep/$name.profile.gz" "$@" || rc=1
  pass_done "$name"
}

# 1. A machine without the CUDA toolkit must build and pass too (--config=nocuda), and every
#    unit test runs under AddressSanitizer + UndefinedBehaviorSanitizer there (--config=asan):
#    one build serves both. Only the tests and what they need are built: the binaries no test
#    uses (benchmarks, fuzzers, the chat and load-generator programs) compile in the main pass
#    and the fuzz pass already, and instrumenting them here cost CI minutes for no check.
# shellcheck disable=SC2086  # one pattern per word
#    Tests tagged no-sanitizer (long sweeps whose code paths quicker tests in the pass cover)
#    are left to the main pass.
extra_pass asan --config=nocuda --config=asan --build_tests_only --test_tag_filters=-no-sanitizer $packages

# 2. ThreadSanitizer over the engine, scheduler, communicator and server tests
#    (//tools/tsan:tsan_suite; tools/tsan/BUILD says how TSan is made to see absl::Mutex).
extra_pass tsan --config=nocuda --config=tsan //tools/tsan:tsan_suite

# 3. Every libFuzzer target for TPSERVE_CI_FUZZ_SECONDS (default 10) each, from its seeds.
rm -rf bazel-fuzz-report && mkdir -p bazel-fuzz-report
if [ "${TPSERVE_SKIP_FUZZ:-0}" != "1" ]; then
  TPSERVE_FUZZ_JUNIT="$PWD/bazel-fuzz-report/test.xml" \
    bash tools/fuzz.sh "${TPSERVE_CI_FUZZ_SECONDS:-10}" || rc=1
fi
pass_done fuzz
tpserve_trim_disk_cache

# Where the time went, pass by pass, so that a run that grows shows where.
total=$((SECONDS > 0 ? SECONDS : 1))
echo "test.sh: wall time by pass"
for i in "${!pass_names[@]}"; do
  printf '  %-6s %5d s  %3d%%\n' "${pass_names[$i]}" "${pass_seconds[$i]}" \
    $((100 * pass_seconds[i] / total))
done
printf '  %-6s %5d s  (%dm%02ds)\n' total "$SECONDS" $((SECONDS / 60)) $((SECONDS % 60))

python3 - bazel-bep/*.json <<'PY' || rc=1
import glob, json, os, sys, urllib.parse, xml.etree.ElementTree as ET
passed = failed = skipped = 0
reports = ["bazel-e2e-report/test.xml"] + glob.glob("bazel-fuzz-report/*.xml")
for bep in sys.argv[1:]:
    with open(bep) as events:
        for line in events:
            result = json.loads(line).get("testResult")
            if result is None:
                continue
            xml = [urllib.parse.unquote(o["uri"][len("file://"):])
                   for o in result.get("testActionOutput", [])
                   if o.get("name") == "test.xml" and o.get("uri", "").startswith("file://")]
            if xml and os.path.exists(xml[0]):
                reports.append(xml[0])
            elif result.get("status") != "PASSED":
                failed += 1  # no report at all, e.g. killed at its time limit before writing one
for path in reports:
    try:
        root = ET.parse(path).getroot()
    except (ET.ParseError, OSError):
        failed += 1  # a test that crashed before writing its report, or a pass that wrote none
        continue
    for case in root.iter("testcase"):
        if case.find("failure") is not None or case.find("error") is not None:
            failed += 1
        elif case.find("skipped") is not None or case.get("status") == "notrun" or case.get("result") == "skipped":
            skipped += 1
        else:
            passed += 1
print(f"{passed} passed, {failed} failed, {skipped} skipped")
sys.exit(1 if failed else 0)
PY
exit $rc
