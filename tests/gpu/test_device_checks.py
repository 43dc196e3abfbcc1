"""tests/gpu/device_checks.sh never lets a check that did not run pass silently.

Each test runs the real script over a faked machine: a fake `nvidia-smi` on PATH showing 0, 1 or
2 GPUs, and a fake bundle (GPU_BUNDLE) whose gtest binaries are shell scripts that print gtest's
output and write a gtest XML report of given cases (passed, failed, skipped with a message,
disabled), exit with a given status, or sleep past their timeout. DEVICE_CHECKS_ONLY keeps each
run to the steps under test. Each test asserts the exit status and the exact NOT RUN and last
lines it expects.
Run: python3 -m pytest -q tests/gpu/test_device_checks.py
"""

import json
import os
import pathlib
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tests/gpu/device_checks.sh"
EXPECTED_LIST = ROOT / "tests/gpu/expected_not_run.txt"
sys.path.insert(0, str(ROOT / "tests/gpu"))
import summarize  # noqa: E402

FAKE_NVIDIA_SMI = """#!/bin/bash
n=${FAKE_GPUS:-0}
if [[ "$*" == "-L" ]]; then
  (( n == 0 )) && { echo "No devices were found"; exit 6; }
  for ((i = 0; i < n; i++)); do echo "GPU $i: NVIDIA H100 80GB HBM3 (UUID: GPU-fake-$i)"; done
elif [[ "$*" == --query-gpu=* ]]; then
  echo "index, name, driver_version, memory.total [MiB]"
  for ((i = 0; i < n; i++)); do echo "$i, NVIDIA H100 80GB HBM3, 580.00, 81559 MiB"; done
else
  echo "fake nvidia-smi: $n GPU(s)"
fi
"""

TWO_GPU_SKIP = "no CUDA device: 1 visible, 2 needed; NCCL communicator not exercised"
TWO_RANK_TESTS = [
    "NcclCommunicator.TwoRanksOnTwoGpusAgreeWithRankOrderSum",
    "NcclCommunicator.TwoRanksAllToAllPutEveryPieceAtItsOffset",
    "NcclCommunicator.AwaitTimesOutWhenAPeerNeverEntersTheCollective",
]


def gtest_xml(cases):
    """A gtest XML report (the layout gtest 1.12 writes) of (Suite.Name, result, message)."""
    root = ET.Element("testsuites", name="AllTests", tests=str(len(cases)))
    suites = {}
    for full_name, result, message in cases:
        suite_name, name = full_name.split(".", 1)
        suite = suites.get(suite_name)
        if suite is None:
            suite = suites[suite_name] = ET.SubElement(root, "testsuite", name=suite_name)
        attrs = {"name": name, "classname": suite_name, "file": "fake_test.cc", "line": "1"}
        if result == "disabled":
            attrs.update(status="notrun", result="suppressed")
        else:
            attrs.update(status="run", result="skipped" if result == "skipped" else "completed")
        case = ET.SubElement(suite, "testcase", attrs)
        if result == "failed":
            ET.SubElement(case, "failure", message=f"fake_test.cc:9\n{message}").text = message
        elif result == "skipped":
            ET.SubElement(case, "skipped", message=f"fake_test.cc:2\n{message}").text = message
    return ET.tostring(root, encoding="unicode")


def fake_gtest(bundle, name, cases=(), exit_status=0, sleep_s=0, write_report=True):
    """A bundle binary `name`: prints gtest-like lines for `cases`, writes their XML report to
    --gtest_output=xml:PATH, sleeps `sleep_s`, exits `exit_status`."""
    report = bundle / f"{name}.report.xml"
    report.write_text(gtest_xml(cases))
    lines = []
    for full_name, result, message in cases:
        lines.append(f"[ RUN      ] {full_name}")
        if result == "skipped":
            lines += ["fake_test.cc:2: Skipped", message, f"[  SKIPPED ] {full_name} (0 ms)"]
        elif result == "failed":
            lines += [f"fake_test.cc:9: Failure\n{message}", f"[  FAILED  ] {full_name} (0 ms)"]
        elif result == "passed":
            lines.append(f"[       OK ] {full_name} (0 ms)")
    skipped = sum(1 for c in cases if c[1] == "skipped")
    if skipped:
        lines.append(f"[  SKIPPED ] {skipped} tests, listed below:")
    body = "\n".join(lines).replace("'", "'\\''")
    copy = f'cp "{report}" "${{out#xml:}}"' if write_report else ":"
    script = bundle / "bin" / name
    script.write_text(f"""#!/bin/bash
out=""
for a in "$@"; do [[ "$a" == --gtest_output=* ]] && out="${{a#--gtest_output=}}"; done
echo '{body}'
{copy}
{"exec sleep " + str(sleep_s) if sleep_s else ":"}
exit {exit_status}
""")
    script.chmod(0o755)


@pytest.fixture
def machine(tmp_path):
    """(bundle, run): `run(gpus, only, **env)` runs device_checks.sh over the fake bundle on a
    machine showing `gpus` GPUs; returns (exit status, output lines, summary.json)."""
    bundle = tmp_path / "bundle"
    (bundle / "bin").mkdir(parents=True)
    fake_bin = tmp_path / "fake_bin"
    fake_bin.mkdir()
    smi = fake_bin / "nvidia-smi"
    smi.write_text(FAKE_NVIDIA_SMI)
    smi.chmod(0o755)
    out = tmp_path / "out"

    def run(gpus, only, **env):
        full_env = dict(os.environ, PATH=f"{fake_bin}:{os.environ['PATH']}", FAKE_GPUS=str(gpus),
                        GPU_BUNDLE=str(bundle), DEVICE_CHECKS_ONLY=only, **env)
        result = subprocess.run(["bash", str(SCRIPT), str(out)], env=full_env,
                                capture_output=True, text=True, timeout=120)
        lines = result.stdout.splitlines()
        summary = json.loads((out / "summary.json").read_text())
        return result.returncode, lines, summary

    return bundle, run


def not_run_lines(lines):
    return [line for line in lines if line.startswith("device_checks: NOT RUN")]


def test_a_passing_gtest_passes(machine):
    bundle, run = machine
    fake_gtest(bundle, "device_wait_test", [("DeviceWait.Deadline", "passed", "")])
    status, lines, summary = run(1, "device_wait_test")
    assert status == 0, "\n".join(lines)
    assert not_run_lines(lines) == []
    assert lines[-1] == ("device_checks: 2 passed, 0 failed, 0 not run (all expected; "
                         "only device_wait_test (DEVICE_CHECKS_ONLY))")
    assert summary["steps"][1]["tests_passed"] == 1


def test_a_failing_gtest_fails(machine):
    bundle, run = machine
    fake_gtest(bundle, "device_wait_test", [("DeviceWait.Deadline", "failed", "1 != 2")],
               exit_status=1)
    status, lines, summary = run(1, "device_wait_test")
    assert status == 1
    assert lines[-1].startswith("device_checks: 1 passed, 1 failed, 0 not run")
    assert summary["steps"][1]["failed_tests"] == ["DeviceWait.Deadline"]


def test_a_no_cuda_device_skip_on_a_gpu_machine_is_not_run_and_fails(machine):
    # The binary exits 0, as gtest does when tests skip: before, this step was "ok".
    bundle, run = machine
    fake_gtest(bundle, "device_wait_test", [
        ("DeviceWait.Deadline", "passed", ""),
        ("DeviceWait.Abort", "skipped", "no CUDA device: 0 visible"),
        ("DeviceWait.DISABLED_Slow", "disabled", ""),
    ])
    status, lines, summary = run(1, "device_wait_test")
    assert status == 1
    assert not_run_lines(lines) == [
        "device_checks: NOT RUN (UNEXPECTED) device_wait_test DeviceWait.Abort: "
        "no CUDA device: 0 visible",
        "device_checks: NOT RUN (UNEXPECTED) device_wait_test DeviceWait.DISABLED_Slow: "
        "disabled (DISABLED_ or not run by gtest)",
    ]
    assert lines[-1].startswith("device_checks: 2 passed, 0 failed, 2 not run (2 unexpected")
    assert summary["not_run_unexpected"] == 2 and summary["exit_status"] == 1


def nccl_with_two_rank_skips(bundle, message=TWO_GPU_SKIP):
    fake_gtest(bundle, "nccl_communicator_test",
               [("NcclCommunicator.SingleRankF32CollectivesOnItsOwnStream", "passed", "")] +
               [(name, "skipped", message) for name in TWO_RANK_TESTS])


def test_two_gpu_nccl_cases_on_one_gpu_are_expected_and_listed(machine):
    bundle, run = machine
    nccl_with_two_rank_skips(bundle)
    status, lines, _ = run(1, "nccl_communicator_test")
    assert status == 0, "\n".join(lines)
    assert not_run_lines(lines) == [
        f"device_checks: NOT RUN (expected) nccl_communicator_test {name}: {TWO_GPU_SKIP}"
        for name in TWO_RANK_TESTS]
    # The expected list is printed with the result, each entry saying whether it applied.
    at = lines.index("device_checks: expected not to run (expected_not_run.txt; here 1 GPU(s)):")
    assert lines[at + 1] == (
        f"  nccl_communicator_test {TWO_RANK_TESTS[0]} when gpus<2 (skip says \"1 visible, 2 "
        "needed\"): applies here, not run as expected")
    assert lines[-1].startswith("device_checks: 2 passed, 0 failed, 3 not run (all expected")


def test_two_gpu_nccl_cases_skipping_on_two_gpus_fail(machine):
    bundle, run = machine
    nccl_with_two_rank_skips(bundle)
    status, lines, _ = run(2, "nccl_communicator_test")
    assert status == 1
    assert [line.split(" nccl_communicator_test")[0] for line in not_run_lines(lines)] == [
        "device_checks: NOT RUN (UNEXPECTED)"] * 3
    assert "does not apply here" in "\n".join(lines)


def test_an_expected_test_skipping_for_another_reason_fails(machine):
    # One GPU, but the CUDA runtime sees none: the two-rank tests' skip is not the excused one.
    bundle, run = machine
    nccl_with_two_rank_skips(bundle, "no CUDA device: 0 visible, 2 needed")
    status, lines, _ = run(1, "nccl_communicator_test")
    assert status == 1
    assert len(not_run_lines(lines)) == 3
    assert all("(UNEXPECTED)" in line for line in not_run_lines(lines))


def test_a_step_cut_by_its_timeout_is_not_run(machine):
    bundle, run = machine
    fake_gtest(bundle, "device_wait_test", [("DeviceWait.Deadline", "passed", "")], sleep_s=60)
    status, lines, _ = run(1, "device_wait_test", DEVICE_CHECKS_MAX_STEP_S="1")
    assert status == 1
    assert not_run_lines(lines) == [
        "device_checks: NOT RUN (UNEXPECTED) device_wait_test: cut by the time budget: timed out "
        "after 1s, set by DEVICE_CHECKS_MAX_STEP_S (exit 124); 1 tests had passed"]


def test_a_step_with_no_time_left_is_not_started_and_not_run(machine):
    bundle, run = machine
    fake_gtest(bundle, "device_wait_test", [("DeviceWait.Deadline", "passed", "")])
    status, lines, _ = run(1, "device_wait_test", DEVICE_CHECKS_BUDGET_S="10")
    assert status == 1
    [line] = not_run_lines(lines)
    assert re.fullmatch(r"device_checks: NOT RUN \(UNEXPECTED\) device_wait_test: not started: "
                        r"time budget used \(\d+s of DEVICE_CHECKS_BUDGET_S=10s left, 20 s "
                        r"needed\)", line), line


def test_a_step_missing_from_the_bundle_or_its_report_is_not_run(machine):
    bundle, run = machine
    fake_gtest(bundle, "device_wait_test", [("DeviceWait.Deadline", "passed", "")],
               write_report=False)
    status, lines, _ = run(1, "device_wait_test cuda_parity_test")
    assert status == 1
    assert not_run_lines(lines) == [
        "device_checks: NOT RUN (UNEXPECTED) device_wait_test: no readable test report "
        "(FileNotFoundError): which tests ran is unknown",
        "device_checks: NOT RUN (UNEXPECTED) cuda_parity_test: not in the bundle",
    ]


def test_without_a_gpu_everything_is_plainly_not_run_and_the_exit_status_is_zero(machine):
    bundle, run = machine
    fake_gtest(bundle, "device_wait_test", [
        ("DeviceWait.RejectsBadOptions", "passed", ""),
        ("DeviceWait.Deadline", "skipped", "no CUDA device: no CUDA driver found")])
    status, lines, summary = run(0, "device_wait_test cuda_parity_test")
    assert status == 0, "\n".join(lines)
    assert not_run_lines(lines) == [
        "device_checks: NOT RUN (no GPU) environment: no GPU visible: every device step is "
        "NOT RUN",
        "device_checks: NOT RUN (no GPU) device_wait_test: no GPU: device tests skipped",
        "device_checks: NOT RUN (no GPU) cuda_parity_test: not in the bundle",
    ]
    assert lines[-1] == ("device_checks: 0 passed, 0 failed, 3 not run (no GPU; only "
                         "device_wait_test cuda_parity_test (DEVICE_CHECKS_ONLY))")
    assert summary["gpus"] == 0 and summary["exit_status"] == 0


def test_without_a_gpu_a_failed_step_still_fails(machine):
    bundle, run = machine
    fake_gtest(bundle, "device_wait_test", [("DeviceWait.Deadline", "failed", "boom")],
               exit_status=1)
    status, lines, _ = run(0, "device_wait_test")
    assert status == 1
    assert lines[-1].startswith("device_checks: 0 passed, 1 failed, 1 not run (no GPU")


def test_a_broken_expected_list_fails_closed_on_a_gpu_machine(machine, tmp_path):
    bundle, run = machine
    fake_gtest(bundle, "device_wait_test", [("DeviceWait.Deadline", "passed", "")])
    broken = tmp_path / "expected.txt"
    broken.write_text("device_wait_test DeviceWait.Deadline sometimes\n")
    status, lines, summary = run(1, "device_wait_test", DEVICE_CHECKS_EXPECTED=str(broken))
    assert status == 1
    assert summary["summarize"] == "failed"
    assert ("device_checks: summarize.py failed: single tests' skips unchecked, so this run "
            "fails") in lines


def test_the_expected_list_names_real_steps_and_tests():
    entries = summarize.load_expected(EXPECTED_LIST)
    assert {(e["step"], e["test"]) for e in entries} == {
        ("nccl_communicator_test", name) for name in TWO_RANK_TESTS}
    script = SCRIPT.read_text()
    sources = subprocess.run(["git", "ls-files", "*_test.cc"], cwd=ROOT, capture_output=True,
                             text=True, check=True).stdout.split()
    text = "\n".join((ROOT / s).read_text() for s in sources if (ROOT / s).exists())
    for e in entries:
        assert f"run_gtest {e['step']} " in script, e
        suite, name = e["test"].split(".")
        assert f"TEST({suite}, {name})" in text, e
        assert e["when"] == "gpus<2" and e["says"] == "1 visible, 2 needed"
