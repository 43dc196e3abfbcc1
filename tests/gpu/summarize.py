"""Writes $OUT/summary.json for device_checks.sh: every step's status, seconds and key figures.

    python3 tests/gpu/summarize.py STEPS_TSV OUT_DIR WORK_DIR TOTAL_SECONDS

STEPS_TSV has one line per step: name, status, seconds, kind, artifact, note (tab-separated);
the statuses are decided by device_checks.sh, this only reads the artifacts (gtest JSON, the
benchmark's JSON, nvidia-smi's CSV) for figures, and prints them as a short table.
"""
import csv
import json
import os
import sys


def gtest_figures(path):
    with open(path) as f:
        report = json.load(f)
    passed, failed, skipped, failed_names = 0, 0, 0, []
    for suite in report.get("testsuites", []):
        for case in suite.get("testsuite", []):
            name = f'{suite["name"]}.{case["name"]}'
            if case.get("failures"):
                failed += 1
                failed_names.append(name)
            elif case.get("result") == "SKIPPED":
                skipped += 1
            else:
                passed += 1
    return {"tests_passed": passed, "tests_failed": failed, "tests_skipped": skipped,
            "failed_tests": failed_names[:10]}


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
    except (OSError, ValueError, KeyError) as e:  # a half-written artifact after a crash
        return {"figures_error": f"{type(e).__name__}: {e}"}
    return {}


def main():
    steps_tsv, out_dir, work_dir, total_s = sys.argv[1:5]
    steps = []
    with open(steps_tsv) as f:
        for line in f:
            name, status, seconds, kind, artifact, note = (line.rstrip("\n").split("\t") + [""] * 6)[:6]
            step = {"name": name, "status": status, "seconds": float(seconds or 0)}
            if note:
                step["note"] = note
            step.update(figures(kind, artifact))
            steps.append(step)
    libraries = {}
    libs_tsv = os.path.join(work_dir, "libraries.tsv")
    if os.path.exists(libs_tsv):
        with open(libs_tsv) as f:
            libraries = dict(line.rstrip("\n").split("\t", 1) for line in f if "\t" in line)
    count = lambda s: sum(1 for step in steps if step["status"] == s)
    summary = {"passed": count("ok"), "failed": count("failed"), "skipped": count("skipped"),
               "total_s": int(total_s), "libraries": libraries, "steps": steps}
    with open(os.path.join(out_dir, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
        f.write("\n")
    print(f'{"step":<24} {"status":<8} {"s":>6}  figures')
    for step in steps:
        shown = {k: v for k, v in step.items() if k not in ("name", "status", "seconds")}
        print(f'{step["name"]:<24} {step["status"]:<8} {step["seconds"]:>6.1f}  '
              f'{json.dumps(shown)[:400]}')


if __name__ == "__main__":
    main()
