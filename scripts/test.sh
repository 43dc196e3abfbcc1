#!/usr/bin/env bash
# Runs the whole test suite after set-up, and ends with one line "N passed, N failed"
# counting test cases from the JUnit XML that Bazel writes for every test target.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh || exit 1
export TPSERVE_MODEL_DIR="${TPSERVE_MODEL_DIR:-$HOME/.cache/tpserve}"

bazel test //... "$@"
rc=$?

# End-to-end: real launcher and worker processes, driven from Python gRPC.
rm -rf bazel-e2e-report && mkdir -p bazel-e2e-report
if bazel build //deploy:launch //worker:worker; then
  python3 -m pytest -q tests/e2e --junitxml=bazel-e2e-report/test.xml || rc=1
else
  rc=1
  echo '<testsuite><testcase name="e2e-build"><failure/></testcase></testsuite>' > bazel-e2e-report/test.xml
fi

python3 - <<'PY'
import glob, os, xml.etree.ElementTree as ET
passed = failed = skipped = 0
for path in glob.glob("bazel-testlogs/**/test.xml", recursive=True) + ["bazel-e2e-report/test.xml"]:
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
