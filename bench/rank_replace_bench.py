"""Time without service when a rank dies (issue 40): a real cluster of SmolLM2 (launcher + worker
processes) serving 16 concurrent greedy streams; once every stream has its first token, rank 1
is killed with SIGKILL. The launcher replaces it in place (a successor loads rank 1's shard,
the others regroup, every sequence is recomputed from its tokens). Reports, per run, the
engine's own figure (tpserve_rank_replacement_seconds_total: the failed step to the group
re-formed) and what the clients saw: the longest pause between two tokens of a stream. Not a
test: numbers go to docs/RELIABILITY.md.

  python3 bench/rank_replace_bench.py [LAYOUT ...]     # LAYOUT: tp3 (default) or pp2
"""
import concurrent.futures
import os
import pathlib
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests/e2e"))
from conftest import MODEL, pb, pb_grpc  # noqa: E402
import grpc  # noqa: E402

BIN = pathlib.Path(os.environ.get("TPSERVE_BIN_DIR", ROOT / "bazel-bin"))
RUNS = 3
STREAMS = 16
LAYOUTS = {"tp3": ["--ranks=3"], "pp2": ["--ranks=1", "--pp=2"]}


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def one_run(layout):
    tmp = pathlib.Path(tempfile.mkdtemp())
    ready = tmp / "ready"
    log = open(tmp / "log", "w+")
    env = dict(os.environ, TPSERVE_WORKER_BIN=str(BIN / "worker/worker"))
    proc = subprocess.Popen([str(BIN / "deploy/launch"), *LAYOUTS[layout], f"--model={MODEL}",
                             "--port=0", f"--http_port={free_port()}", f"--ready_file={ready}",
                             "--context=512", f"--max_seqs={STREAMS}"],
                            stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        while not ready.exists():
            assert proc.poll() is None, (tmp / "log").read_text()
            time.sleep(0.1)
        grpc_addr, http_url = ready.read_text().splitlines()[:2]
        text = (tmp / "log").read_text()
        pids = [int(p) for p in text.split("(pids", 1)[1].split(")", 1)[0].split()]
        stub = pb_grpc.TpServeStub(grpc.insecure_channel(grpc_addr))
        started = [threading.Event() for _ in range(STREAMS)]

        def stream(i):
            req = pb.GenerateRequest(text=f"Tell me fact number {i} about rivers.",
                                     max_new_tokens=120, ignore_eos=True)
            req.sampling.temperature = 0.0
            last, longest = None, 0.0
            for m in stub.Generate(req, timeout=600):
                now = time.time()
                if last is not None:
                    longest = max(longest, now - last)
                last = now
                started[i].set()
            return longest

        with concurrent.futures.ThreadPoolExecutor(STREAMS) as pool:
            gaps = [pool.submit(stream, i) for i in range(STREAMS)]
            for e in started:
                e.wait(120)
            time.sleep(0.5)
            os.kill(pids[1], signal.SIGKILL)
            longest = max(g.result() for g in gaps)
        with urllib.request.urlopen(f"{http_url}/metrics", timeout=10) as r:
            metrics = r.read().decode()
        seconds = float(re.search(r"^tpserve_rank_replacement_seconds_total (\S+)$", metrics,
                                  re.M).group(1))
        count = int(float(re.search(r"^tpserve_rank_replacements_total (\S+)$", metrics,
                                    re.M).group(1)))
        return count, seconds, longest
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)


def main():
    layouts = sys.argv[1:] or ["tp3"]
    print(f"SmolLM2 Q4_1, {STREAMS} greedy streams of 120 tokens, rank 1 SIGKILLed after every "
          f"stream's first token; {RUNS} runs per layout")
    print("| layout | run | replacements | engine: failed step to regrouped (s) | "
          "clients: longest pause between tokens (s) |")
    print("|---|---|---|---|---|")
    for layout in layouts:
        for run in range(RUNS):
            count, seconds, longest = one_run(layout)
            print(f"| {layout} | {run + 1} | {count} | {seconds:.2f} | {longest:.2f} |")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
