"""Writes $OUT/summary.json for device_checks.sh, lists every check that did not run, and
decides the run's exit status.

    python3 tests/gpu/summarize.py STEPS_TSV OUT_DIR WORK_DIR TOTAL_SECONDS \
        --gpus=N --expected=tests/gpu/expected_not_run.txt [--only="step ..."]

STEPS_TSV has one line per step: name, status (ok / failed / not_run), seconds, kind, artifact,
note (tab-separated), as device_checks.sh decided them. This reads the artifacts (a gtest's XML
report, the benchmark's JSON, nvidia-smi's CSV) for figures, and finds what did not run: every
not_run step (not in the bundle, no time left to start it, cut by its timeout, skipped by its
binary, no GPU) and every gtest case of a step that ran which skipped (GTEST_SKIP, with its
message) or was disabled. Each is printed as a "NOT RUN" line with its reason and whether the
expected list (expected_not_run.txt) excuses it on this machine; then the list itself; then the
last line, "device_checks: N passed, M failed, K not run (...)".

Exit status: 0; 3 when a step failed, or when a GPU is visible (--gpus > 0) and some check not
run is not on the expected list. Without a GPU every not-run check is reported as NOT RUN (no
GPU) and only failed steps count, as before. (1 is left to Python itself failing: device_checks.sh
then decides without this, failing closed.)
"""
import argparse
import csv
import fnmatch
import json
import os
import re
import xml.etree.ElementTree as ET

FAILED_EXIT = 3


def gtest_cases(path):
    """[{name, result, message}] from a gtest XML report; result is passed, failed, skipped or
    disabled (DISABLED_ tests, and any test gtest did not run)."""
    cases = []
    for case in ET.parse(path).getroot().iter("testcase"):
        name = f'{case.get("classname")}.{case.get("name")}'
        skipped = case.find("skipped")
        if case.find("failure") is not None or case.find("error") is not None:
            cases.append({"name": name, "result": "failed", "message": ""})
        elif skipped is not None or case.get("result") == "skipped":
            message = skipped.get("message", "") if skipped is not None else ""
            # gtest writes "file:line\nreason": the reason is what a reader needs.
            reason = message.split("\n", 1)[-1].strip() or "skipped, no reason given"
            cases.append({"name": name, "result": "skipped", "message": reason})
        elif case.get("status") == "notrun" or case.get("result") == "suppressed":
            cases.append({"name": name, "result": "disabled",
                          "message": "disabled (DISABLED_ or not run by gtest)"})
        else:
            cases.append({"name": name, "result": "passed", "message": ""})
    return cases


def gtest_figures(path):
    cases = gtest_cases(path)
    count = lambda r: sum(1 for c in cases if c["result"] == r)
    return {"tests_passed": count("passed"), "tests_failed": count("failed"),
            "tests_skipped": count("skipped") + count("disabled"),
            "failed_tests": [c["name"] for c in cases if c["result"] == "failed"][:10]}


def bench_figures(path):
    with open(path) as f:
        bench = json.load(f)
    out = {"status": bench.get("status"), "device": bench.get("device"),
           "hbm_copy_gbps": bench.get("hbm_copy", {}).get("gbps"), "error": bench.get("error")}
    for name, fmt in bench.get("formats", {}).items():
        if fmt.get("status") != "ok":
            out[name] = {"status": fmt.get("status"), "error": fmt.get("error")}
            continue
        d1, dn, p = fmt["decode_batch1"], fmt["decode_batchN"], fmt["prefill"]
        out[name] = {
            "load_s": round(fmt["load_s"], 1),
            "load_cpu_s": round(fmt.get("load_cpu_s", 0), 1),
            "weight_gb": round(fmt["weight_bytes"] / 1e9, 2),
            "decode_b1_tokens_per_s": round(d1["tokens_per_s"], 1),
            "decode_b1_step_ms": round(d1["step_ms_median"], 3),
            "decode_b1_fraction_of_hbm": round(d1["fraction_of_copy_bandwidth"], 3),
            f'decode_b{dn["batch"]}_tokens_per_s': round(dn["tokens_per_s"], 1),
            "prefill_tflops": round(p["tflops"], 1),
            "prefill_fraction_of_peak": round(p["fraction_of_peak"], 3),
            "peak_used": f'{p["peak_name"]} {p["peak_tflops_used"]} TFLOP/s',
        }
    return {k: v for k, v in out.items() if v is not None}


def env_figures(path):
    with open(path) as f:
        rows = list(csv.reader(f))
    if len(rows) < 2:
        return {}
    header = [h.strip() for h in rows[0]]
    return {"gpus": [dict(zip(header, (c.strip() for c in r))) for r in rows[1:] if r]}


def figures(kind, artifact):
    if not artifact or not os.path.exists(artifact):
        return {}
    try:
        if kind == "gtest":
            return gtest_figures(artifact)
        if kind == "bench":
            return bench_figures(artifact)
        if kind == "env":
            return env_figures(artifact)
    except (OSError, ValueError, KeyError, ET.ParseError) as e:  # half-written after a crash
        return {"figures_error": f"{type(e).__name__}: {e}"}
    return {}


def read_steps(steps_tsv):
    steps = []
    with open(steps_tsv) as f:
        for line in f:
            name, status, seconds, kind, artifact, note = (
                line.rstrip("\n").split("\t") + [""] * 6)[:6]
            steps.append({"name": name, "status": status, "seconds": float(seconds or 0),
                          "kind": kind, "artifact": artifact, "note": note})
    return steps


def not_run_items(steps):
    """Every check that did not run: [{step, test, reason}] (test "-" for a whole step)."""
    items = []
    for step in steps:
        if step["status"] == "not_run":
            items.append({"step": step["name"], "test": "-", "reason": step["note"] or "no reason"})
            continue
        if step["kind"] != "gtest" or step["status"] != "ok":
            continue  # a failed step fails the run whatever else it holds
        # A gtest that exited 0: which of its cases ran is in its report, and only there.
        try:
            cases = gtest_cases(step["artifact"])
        except (OSError, ET.ParseError) as e:
            items.append({"step": step["name"], "test": "-",
                          "reason": f"no readable test report ({type(e).__name__}): which tests "
                                    "ran is unknown"})
            continue
        items += [{"step": step["name"], "test": c["name"], "reason": c["message"]}
                  for c in cases if c["result"] in ("skipped", "disabled")]
    return items


def load_expected(path):
    """The expected list: [{step, test, when, says}] (see expected_not_run.txt's header)."""
    entries = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            fields = line.split(None, 3)
            if len(fields) < 3 or not re.fullmatch(r"always|gpus<\d+", fields[2]):
                raise ValueError(f"{path}:{number}: want 'step test when [skip says]', "
                                 f"when = always or gpus<N; got {line!r}")
            entries.append({"step": fields[0], "test": fields[1], "when": fields[2],
                            "says": fields[3] if len(fields) > 3 else ""})
    return entries


def applies(entry, gpus):
    """Whether `entry`'s condition holds on a machine showing `gpus` GPUs."""
    if entry["when"] == "always":
        return True
    return gpus < int(entry["when"][len("gpus<"):])


def excused_by(item, expected, gpus):
    """The expected entry that excuses `item` here, or None."""
    for entry in expected:
        if (entry["step"] == item["step"] and fnmatch.fnmatchcase(item["test"], entry["test"])
                and applies(entry, gpus) and entry["says"] in item["reason"]):
            return entry
    return None


def classify(steps, expected, gpus):
    """(items, exit status): each not-run item with `expected` set; 0 or FAILED_EXIT."""
    items = not_run_items(steps)
    for item in items:
        item["expected"] = gpus > 0 and excused_by(item, expected, gpus) is not None
    failed = any(step["status"] == "failed" for step in steps)
    unexpected = gpus > 0 and any(not item["expected"] for item in items)
    return items, FAILED_EXIT if failed or unexpected else 0


def report_lines(steps, items, expected, gpus, expected_path, only):
    """The NOT RUN lines, the expected list and the last line."""
    lines = []
    for item in items:
        what = item["step"] if item["test"] == "-" else f'{item["step"]} {item["test"]}'
        if gpus == 0:
            lines.append(f'device_checks: NOT RUN (no GPU) {what}: {item["reason"]}')
        else:
            tag = "expected" if item["expected"] else "UNEXPECTED"
            lines.append(f'device_checks: NOT RUN ({tag}) {what}: {item["reason"]}')
    where = f"{gpus} GPU(s)" if gpus else "no GPU: the list does not apply"
    lines.append(f"device_checks: expected not to run ({os.path.basename(expected_path)}; "
                 f"here {where}):")
    for entry in expected:
        hit = [i for i in items if i["expected"] and excused_by(i, [entry], gpus)]
        state = ("applies here" if applies(entry, gpus) else "does not apply here") if gpus else "-"
        lines.append(f'  {entry["step"]} {entry["test"]} when {entry["when"]} '
                     f'(skip says "{entry["says"]}"): {state}'
                     f'{", not run as expected" if hit else ""}')
    if not expected:
        lines.append("  (none)")
    count = lambda s: sum(1 for step in steps if step["status"] == s)
    if gpus == 0:
        tail = "no GPU"
    else:
        surprises = sum(1 for i in items if not i["expected"])
        tail = f"{surprises} unexpected" if surprises else "all expected"
    if only:
        tail += f"; only {only} (DEVICE_CHECKS_ONLY)"
    lines.append(f'device_checks: {count("ok")} passed, {count("failed")} failed, '
                 f'{len(items)} not run ({tail})')
    return lines


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("steps_tsv")
    parser.add_argument("out_dir")
    parser.add_argument("work_dir")
    parser.add_argument("total_s", type=int)
    parser.add_argument("--gpus", type=int, default=0, help="GPUs nvidia-smi shows")
    parser.add_argument("--expected", required=True, help="the expected-not-run list")
    parser.add_argument("--only", default="", help="DEVICE_CHECKS_ONLY, if set")
    args = parser.parse_args(argv)
    steps = read_steps(args.steps_tsv)
    expected = load_expected(args.expected)
    items, status = classify(steps, expected, args.gpus)
    for step in steps:
        step.update(figures(step["kind"], step["artifact"]))
    libraries = {}
    libs_tsv = os.path.join(args.work_dir, "libraries.tsv")
    if os.path.exists(libs_tsv):
        with open(libs_tsv) as f:
            libraries = dict(line.rstrip("\n").split("\t", 1) for line in f if "\t" in line)
    count = lambda s: sum(1 for step in steps if step["status"] == s)
    shown_steps = [{k: v for k, v in step.items() if k not in ("kind", "artifact") and v != ""}
                   for step in steps]
    summary = {"passed": count("ok"), "failed": count("failed"), "not_run": len(items),
               "not_run_unexpected": sum(1 for i in items if not i["expected"]) if args.gpus else 0,
               "gpus": args.gpus, "exit_status": 1 if status else 0,
               "total_s": args.total_s, "libraries": libraries, "steps": shown_steps,
               "not_run_checks": items, "expected_not_run": expected}
    if args.only:
        summary["only"] = args.only
    with open(os.path.join(args.out_dir, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
        f.write("\n")
    print(f'{"step":<24} {"status":<8} {"s":>6}  figures')
    for step in shown_steps:
        shown = {k: v for k, v in step.items() if k not in ("name", "status", "seconds")}
        print(f'{step["name"]:<24} {step["status"]:<8} {step["seconds"]:>6.1f}  '
              f'{json.dumps(shown)[:400]}')
    print("\n".join(report_lines(steps, items, expected, args.gpus, args.expected, args.only)))
    return status


if __name__ == "__main__":
    raise SystemExit(main())
