#!/usr/bin/env python3
"""Side-by-side table of load-generator runs: the JSON files of //deploy:loadgen and of
bench/llama_cpp_loadgen.py (same schema), one row per file, grouped by concurrency.

    python3 bench/compare_loadgen.py out/tpserve_c1.json out/llama_cpp_c1.json ...
"""
import json
import sys


def fmt(v, digits=1):
    return "-" if v is None else f"{v:.{digits}f}"


def row(j):
    s, c = j["summary"], j["config"]
    ok = s["requests_ok"]
    failures = ", ".join(f"{k} {n}" for k, n in sorted(s["failures"].items())) or "none"
    lat = lambda d: f"{fmt(d['p50'])} / {fmt(d['p90'])} / {fmt(d['p99'])}"  # noqa: E731
    return (f"| {c['concurrency']} | {j['tool']} | {ok}/{s['requests']} | "
            f"{fmt(s['prompt_tokens'] / ok if ok else None)} | {fmt(s['requests_per_s'], 3)} | "
            f"{fmt(s['output_tokens_per_s'])} | {lat(s['ttft_ms'])} | {lat(s['itl_ms'])} | "
            f"{lat(s['e2e_ms'])} | {s['good_requests']} ({fmt(s['goodput_requests_per_s'], 3)}/s) | "
            f"{failures} |")


def main(paths):
    runs = [json.load(open(p)) for p in paths]
    if not runs:
        print("compare_loadgen: no JSON files given", file=sys.stderr)
        return 2
    c = runs[0]["config"]
    print(f"prompt tokens {c['prompt_tokens']}, output tokens {c['output_tokens']}, "
          f"{'closed loop' if not c['rate'] else 'Poisson %g requests/s' % c['rate']}, "
          f"temperature {c['temperature']:g}, seed {c['seed']}; goodput SLO: TTFT <= "
          f"{c['slo_ttft_ms']:g} ms and per-request {c['slo_itl_stat']} ITL <= {c['slo_itl_ms']:g} ms")
    print("| conc. | server | ok | prompt tok/req | req/s | out tok/s | TTFT ms p50 / p90 / p99 | "
          "ITL ms p50 / p90 / p99 | E2E ms p50 / p90 / p99 | good (goodput) | failures |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for j in sorted(runs, key=lambda j: (j["config"]["concurrency"], j["tool"] != "tpserve")):
        print(row(j))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
