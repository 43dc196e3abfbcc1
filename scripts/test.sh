#!/usr/bin/env bash
# Runs the whole test suite after set-up, and ends with one line "N passed, N failed"
# counting test cases from the JUnit XML that Bazel writes for every test target.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh || exit 1
export TPSERVE_MODEL_DIR="${TPSERVE_MODEL_DIR:-$HOME/.cache/tpserve}"

bazel test //... "$@"
rc=$?

# End-to-end: real launcher and worker processes, driven from Python gRPC; the reference
# packers of quantized checkpoints (Python, from the public specifications); and the deployment
# files (deploy/Dockerfile, deploy/k8s, deploy/slurm) against the programs' real flags.
# And the soak's short version (tests/soak/test_soak_short.py; soak.py itself is the long run).
rm -rf bazel-e2e-report && mkdir -p bazel-e2e-report
if bazel build //deploy:launch //deploy:client //worker:worker; then
  python3 -m pytest -q tests/e2e tests/golden/quant tests/deploy tests/soak --junitxml=bazel-e2e-report/test.xml || rc=1
else
  rc=1
  echo '<testsuite><testcase name="e2e-build"><failure/></testcase></testsuite>' > bazel-e2e-report/test.xml
fi

# A machine without the CUDA toolkit must build and pass too: the same suite with the toolkit
# hidden (--config=nocuda), in an output base of its own so the two builds do not evict each
# other. TPSERVE_SKIP_NOCUDA=1 skips it (a quicker local run).
nocuda_logs=""
if [ "${TPSERVE_SKIP_NOCUDA:-0}" != "1" ]; then
  nocuda_base="${TPSERVE_NOCUDA_OUTPUT_BASE:-$HOME/.cache/tpserve-bazel-nocuda}"
  # Not //...: the first build's convenience symlink bazel-<this directory's name> points into
  # its output base, which that build skips but a second output base would descend into (and
  # fail on bazel_tools' packages). So every top-level package tree git knows, by name.
  packages=$(git ls-files | grep -E '(^|/)BUILD(\.bazel)?$' |
             awk -F/ '{ print (NF == 1 ? "//:all" : "//" $1 "/...") }' | sort -u)
  # shellcheck disable=SC2086  # one pattern per word
  bazel --output_base="$nocuda_base" test --config=nocuda --symlink_prefix=/ $packages || rc=1
  nocuda_logs=$(bazel --output_base="$nocuda_base" info --config=nocuda bazel-testlogs 2>/dev/null)
fi

NOCUDA_LOGS="$nocuda_logs" python3 - <<'PY'
import glob, os, xml.etree.ElementTree as ET
passed = failed = skipped = 0
reports = glob.glob("bazel-testlogs/**/test.xml", recursive=True) + ["bazel-e2e-report/test.xml"]
if os.environ.get("NOCUDA_LOGS"):
    reports += glob.glob(os.path.join(os.environ["NOCUDA_LOGS"], "**/test.xml"), recursive=True)
for path in reports:
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError:
        failed += 1  # a test that crashed before writing its report
        continue
    for case in root.iter("testcase"):
        if case.find("failure") is not None or case.find("error") is not None:
            failed += 1
        elif case.find("skipped") is not None or case.get("status") == "notrun" or case.get("result") == "skipped":
            skipped += 1
        else:
            passed += 1
print(f"{passed} passed, {failed} failed, {skipped} skipped")
PY
exit $rc
