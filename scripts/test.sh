#!/usr/bin/env bash
# Runs the whole test suite after set-up, and ends with one line "N passed, N failed"
# counting test cases from the JUnit XML that Bazel writes for every test target.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh || exit 1
export TPSERVE_MODEL_DIR="${TPSERVE_MODEL_DIR:-$HOME/.cache/tpserve}"

bazel test //... "$@"
rc=$?

python3 - <<'PY'
import glob, os, xml.etree.ElementTree as ET
passed = failed = skipped = 0
for path in glob.glob("bazel-testlogs/**/test.xml", recursive=True):
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
