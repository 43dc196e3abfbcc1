"""Decode speed of a real cluster (launcher + worker processes) through the public gRPC API,
and where a step's time goes (rank-0 model time, collectives, control plane), for several
tensor-parallel degrees and pipeline layouts. Not a test: numbers go to docs/PERFORMANCE.md.

  python3 bench/cluster_bench.py MODEL.gguf LAYOUT [LAYOUT ...] [-- LAUNCH_FLAGS ...]

A LAYOUT is a rank count (--ranks) or TxP (--ranks=T --pp=P: T x P ranks). The launcher's own
default splits the cores between the ranks (threads_per_rank = cores / ranks, at least 1);
flags after "--" go to every launch (e.g. --comm=gloo). STREAMS (default 1) concurrent
requests each decode the tokens; the rate is all streams' tokens over the longest decode. TPSERVE_BIN_DIR
names another build's bin directory holding deploy/launch and worker/worker (default
bazel-bin), to compare two builds in one run.
"""
import os
import pathlib
import re
import signal
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests/e2e"))
from conftest import pb, pb_grpc  # noqa: E402  (stubs generated from proto/tpserve.proto)
import grpc  # noqa: E402

BIN = pathlib.Path(os.environ.get("TPSERVE_BIN_DIR", ROOT / "bazel-bin"))
NEW_TOKENS = 64
RUNS = 3
STREAMS = int(os.environ.get("STREAMS", "1"))


def bench(model, layout, extra):
    ranks, _, pp = layout.partition("x")
    tmp = pathlib.Path(tempfile.mkdtemp())
    ready = tmp / "ready"
    log = open(tmp / "log", "w+")
    env = dict(os.environ, TPSERVE_WORKER_BIN=str(BIN / "worker/worker"))
    proc = subprocess.Popen([str(BIN / "deploy/launch"), f"--ranks={ranks}", f"--pp={pp or 1}",
                             f"--model={model}", "--port=0", "--http_port=0", f"--ready_file={ready}",
                             "--context=1024", f"--max_seqs={STREAMS}", *extra],
                            stdout=log, stderr=subprocess.STDOUT, env=env)
    while not ready.exists():
        assert proc.poll() is None, (tmp / "log").read_text()
        time.sleep(0.1)
    stub = pb_grpc.TpServeStub(grpc.insecure_channel(ready.read_text().splitlines()[0]))
    rates = []

    def one(i):
        req = pb.GenerateRequest(text=f"The history of the river {i} begins",
                                 max_new_tokens=NEW_TOKENS, ignore_eos=True)
        req.sampling.temperature = 0.0
        return list(stub.Generate(req, timeout=600))[-1].usage

    import concurrent.futures
    with concurrent.futures.ThreadPoolExecutor(STREAMS) as pool:
        for run in range(RUNS + 1):
            usages = list(pool.map(one, range(STREAMS)))
            if run > 0:  # the first run warms up
                tokens = sum(u.completion_tokens - 1 for u in usages)
                rates.append(tokens / max(u.decode_time_s for u in usages))
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=30)
    text = (tmp / "log").read_text()
    m = re.search(r"per step: ([\d.]+) ms wall, rank-0 model ([\d.]+) ms \(collectives ([\d.]+) ms\), "
                  r"control plane ([\d.]+) ms", text)
    return rates, m.groups() if m else None


def main():
    args = sys.argv[1:]
    extra = args[args.index("--") + 1:] if "--" in args else []
    args = args[:args.index("--")] if "--" in args else args
    model, layouts = args[0], args[1:]
    print(f"model {pathlib.Path(model).name}; {NEW_TOKENS} greedy tokens in each of {STREAMS} "
          f"stream(s), {RUNS} runs after a warm-up; launch flags: {' '.join(extra) or '(defaults)'}")
    print("| ranks | decode tok/s (runs) | per step: wall ms | rank-0 model ms | collectives ms | control plane ms |")
    print("|---|---|---|---|---|---|")
    for layout in layouts:
        rates, step = bench(model, layout, extra)
        step = step or ("?",) * 4
        print(f"| {layout} | {' / '.join(f'{r:.1f}' for r in rates)} | {step[0]} | {step[1]} | {step[2]} | {step[3]} |")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
