"""Sums up bench/run_moe_bench.sh's one-sequence rounds: for each model, thread count and engine
(//bench:model_bench's "tpserve" lines, bench/llama_cpp_bench.py's "llama.cpp" lines, each
prefixed "NAME round=R "), the best and median wall tok/s over the rounds and the median CPU ms
per token (all threads of the process; a shared machine's waits for a core do not inflate it),
and tpserve / llama.cpp ratios of the medians (for CPU time: llama.cpp's over tpserve's, so
above 1 means tpserve costs less).

    python bench/moe_bench_summary.py LOG
"""
import re
import statistics
import sys

LINE = re.compile(r"(\S+) round=\d+ (tpserve|llama\.cpp) .*threads=(\d+) .*prefill_tok_s=([\d.]+) "
                  r"decode_tok_s=([\d.]+) prefill_cpu_ms_tok=([\d.]+) decode_cpu_ms_tok=([\d.]+)")


def main():
    rows = {}
    for line in open(sys.argv[1]):
        m = LINE.match(line)
        if m:
            rows.setdefault((m[1], int(m[3]), m[2]), []).append([float(x) for x in m.groups()[3:]])
    print("| model | threads | phase | tpserve tok/s best / median | llama.cpp tok/s best / median "
          "| ratio (medians) | tpserve CPU ms/token | llama.cpp CPU ms/token | CPU ratio | rounds |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for model, threads in sorted({(k[0], k[1]) for k in rows}):
        ours = rows.get((model, threads, "tpserve"), [])
        theirs = rows.get((model, threads, "llama.cpp"), [])
        if not ours or not theirs:
            continue
        for i, phase in enumerate(["prefill", "decode"]):
            a = [x[i] for x in ours]
            b = [x[i] for x in theirs]
            ca = statistics.median(x[i + 2] for x in ours)
            cb = statistics.median(x[i + 2] for x in theirs)
            print(f"| {model} | {threads} | {phase} | {max(a):.1f} / {statistics.median(a):.1f} | "
                  f"{max(b):.1f} / {statistics.median(b):.1f} | "
                  f"{statistics.median(a) / statistics.median(b):.2f}x | {ca:.2f} | {cb:.2f} | "
                  f"{cb / ca:.2f}x | {len(ours)}/{len(theirs)} |")


if __name__ == "__main__":
    main()
